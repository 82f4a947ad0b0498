import type { Clock } from '../../src/clock';
import { applyMigrations, readMigrationFolder } from '../../src/migrations';
import { coreMigrationsFolder } from '../../src/migrations-folder';
import type { SqlExecutor } from '../../src/sql';

/** A clock a test moves by hand. */
export function manualClock(start = '2026-03-01T00:00:00Z'): Clock & { advance(ms: number): void } {
  let now = new Date(start).getTime();
  return {
    now: () => new Date(now),
    advance: (ms) => {
      now += ms;
    },
  };
}

/** Applies the kernel migrations to a scratch database. */
export async function migrateCore(db: SqlExecutor, clock: Clock): Promise<void> {
  await applyMigrations(db, [{ module: 'core', migrations: await readMigrationFolder(coreMigrationsFolder) }], clock);
}
