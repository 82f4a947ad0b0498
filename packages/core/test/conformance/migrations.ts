import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/clock';
import { applyMigrations, type Migration, readMigrationFolder } from '../../src/migrations';
import { coreMigrationsFolder } from '../../src/migrations-folder';
import { isSqlError } from '../../src/sql';
import type { ScratchDatabase } from '../support/databases';

const clock: Clock = { now: () => new Date('2026-01-01T00:00:00Z') };

/** The migrator's contract, run once per backend. */
export function defineMigrationsConformance(create: () => Promise<ScratchDatabase>): void {
  let scratch: ScratchDatabase;
  beforeAll(async () => {
    scratch = await create();
  });
  afterAll(async () => {
    await scratch?.drop();
  });

  describe('migrations', () => {
    it('applies the kernel migrations once and records each file', async () => {
      const migrations = await readMigrationFolder(coreMigrationsFolder);
      const first = await applyMigrations(scratch.db, [{ module: 'core', migrations }], clock);
      expect(first.applied.map((m) => m.name)).toEqual(migrations.map((m) => m.name));
      const second = await applyMigrations(scratch.db, [{ module: 'core', migrations }], clock);
      expect(second.applied).toEqual([]);
      // Only the kernel's rows: the other tests of this suite record their own modules in the same database.
      const { rows } = await scratch.db.query<{ module: string; name: string }>(
        "SELECT module, name FROM schema_migrations WHERE module = 'core' ORDER BY name",
      );
      expect(rows).toEqual(migrations.map((m) => ({ module: 'core', name: m.name })));
      for (const table of ['tenants', 'nodes', 'commands', 'work_items', 'shard_leases', 'events', 'credentials']) {
        const found = await scratch.db.query('SELECT 1 FROM information_schema.tables WHERE table_name = $1', [table]);
        expect(found.rowCount, table).toBe(1);
      }
    });

    it('refuses a migration whose text changed after it was applied', async () => {
      const v1: Migration[] = [{ name: '0000_plg', sql: 'CREATE TABLE plg_acme_ips (ip text)' }];
      await applyMigrations(scratch.db, [{ module: 'acme', migrations: v1 }], clock);
      const edited: Migration[] = [{ name: '0000_plg', sql: 'CREATE TABLE plg_acme_ips (ip inet)' }];
      await expect(applyMigrations(scratch.db, [{ module: 'acme', migrations: edited }], clock)).rejects.toMatchObject({
        code: 'INVALID_CONFIG',
        details: { path: ['modules', 'acme', 'migrations', '0000_plg'] },
      });
    });

    it('applies a module’s new migration after its earlier ones, under the module id', async () => {
      // A module of its own, its earlier migration applied here: no other test's 'acme' rows or tables count.
      const earlier: Migration[] = [{ name: '0000_plg', sql: 'CREATE TABLE plg_globex_ips (ip text)' }];
      const first = await applyMigrations(scratch.db, [{ module: 'globex', migrations: earlier }], clock);
      expect(first.applied).toEqual([{ module: 'globex', name: '0000_plg' }]);
      const migrations: Migration[] = [
        ...earlier,
        { name: '0001_plg', sql: 'ALTER TABLE plg_globex_ips ADD COLUMN step_key text' },
      ];
      const report = await applyMigrations(scratch.db, [{ module: 'globex', migrations }], clock);
      expect(report.applied).toEqual([{ module: 'globex', name: '0001_plg' }]);
    });

    it('leaves nothing half-applied when a statement of a migration fails', async () => {
      // The ledger exists whichever test ran first (a failed first run rolls back its creation too), so what the failed
      // run below recorded is read from it.
      await applyMigrations(scratch.db, [], clock);
      const broken: Migration[] = [
        {
          name: '0000_broken',
          sql: 'CREATE TABLE plg_broken_a (id int);\n--> statement-breakpoint\nCREATE TABLE plg_broken_b (id nosuchtype);',
        },
      ];
      const err = await applyMigrations(scratch.db, [{ module: 'broken', migrations: broken }], clock).catch((e) => e);
      expect(isSqlError(err)).toBe(true);
      const table = await scratch.db.query("SELECT 1 FROM information_schema.tables WHERE table_name = 'plg_broken_a'");
      expect(table.rowCount).toBe(0);
      const recorded = await scratch.db.query("SELECT 1 FROM schema_migrations WHERE module = 'broken'");
      expect(recorded.rowCount).toBe(0);
    });
  });
}
