import { createHash } from 'node:crypto';
import type { Clock } from '../clock';
import { ComputeError } from '../errors';
import type { SqlExecutor } from '../sql/executor';
import { type Migration, splitStatements } from './migration';

// One constant lock id for every better-compute migration, so two processes starting at once take turns.
const MIGRATION_LOCK_ID = 7_428_391_201;

/** A module's migrations, applied under its id. */
export interface ModuleMigrations {
  readonly module: string;
  readonly migrations: readonly Migration[];
}

/** What {@link applyMigrations} did. */
export interface MigrationReport {
  applied: { module: string; name: string }[];
}

function checksum(sql: string): string {
  return createHash('sha256').update(sql).digest('hex');
}

/**
 * Applies every module's pending migrations in one transaction under a transaction-scoped advisory lock, recording a
 * `schema_migrations` row per file. A second process waits for the lock, then finds nothing left to do. A migration
 * whose text changed after it was applied is refused: fix forward with a new file.
 *
 * @example
 * ```ts
 * await applyMigrations(db, [{ module: 'core', migrations }], systemClock);
 * ```
 */
export async function applyMigrations(
  sql: SqlExecutor,
  modules: readonly ModuleMigrations[],
  clock: Clock,
): Promise<MigrationReport> {
  return sql.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_ID]);
    await tx.query(
      `CREATE TABLE IF NOT EXISTS schema_migrations (
        module text NOT NULL,
        name text NOT NULL,
        checksum text NOT NULL,
        applied_at timestamptz NOT NULL,
        PRIMARY KEY (module, name)
      )`,
    );
    const { rows } = await tx.query<{ module: string; name: string; checksum: string }>(
      'SELECT module, name, checksum FROM schema_migrations',
    );
    const done = new Map(rows.map((row) => [`${row.module}/${row.name}`, row.checksum]));
    const applied: MigrationReport['applied'] = [];
    for (const { module, migrations } of modules) {
      for (const migration of migrations) {
        const sum = checksum(migration.sql);
        const previous = done.get(`${module}/${migration.name}`);
        if (previous !== undefined) {
          if (previous !== sum) {
            throw new ComputeError(
              'INVALID_CONFIG',
              `migration ${module}/${migration.name} changed after it was applied; add a new migration instead`,
              { details: { path: ['modules', module, 'migrations', migration.name] } },
            );
          }
          continue;
        }
        for (const statement of splitStatements(migration.sql)) await tx.query(statement);
        await tx.query('INSERT INTO schema_migrations (module, name, checksum, applied_at) VALUES ($1, $2, $3, $4)', [
          module,
          migration.name,
          sum,
          clock.now(),
        ]);
        applied.push({ module, name: migration.name });
      }
    }
    return { applied };
  });
}
