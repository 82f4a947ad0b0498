import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readMigrationFolder } from '../../src/migrations';
import { coreMigrationsFolder } from '../../src/migrations-folder';
import { type ScratchDatabase, scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

const run = promisify(execFile);
const script = fileURLToPath(new URL('../fixtures/migrate-process.ts', import.meta.url));

describe.runIf(TEST_DATABASE_URL)('postgres: migrating from two processes', () => {
  let scratch: ScratchDatabase;
  beforeAll(async () => {
    scratch = await scratchPostgres();
  });
  afterAll(async () => {
    await scratch?.drop();
  });

  it('succeeds in both when two processes migrate one empty database at once', async () => {
    const url = scratch.url as string;
    const results = await Promise.all(
      [0, 1].map(async () => {
        const { stdout } = await run('pnpm', ['exec', 'tsx', script, url], { cwd: process.cwd() });
        return JSON.parse(stdout) as { ok: boolean; applied: number };
      }),
    );
    const migrations = await readMigrationFolder(coreMigrationsFolder);
    expect(results.every((r) => r.ok)).toBe(true);
    // The lock serializes them: one applies everything, the other finds nothing left.
    expect(results.map((r) => r.applied).sort()).toEqual([0, migrations.length]);
    const { rowCount } = await scratch.db.query('SELECT 1 FROM schema_migrations');
    expect(rowCount).toBe(migrations.length);
  });
});
