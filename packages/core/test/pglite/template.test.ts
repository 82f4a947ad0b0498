import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPgliteDatabase } from '../../src/pglite';
import { PGLITE_TEMPLATE_ENV } from '../../src/pglite/template';

// BETTER_COMPUTE_PGLITE_TEMPLATE: in-memory databases start from one empty data directory written by the first.
describe('a PGlite started from a template file', () => {
  let dir: string;
  const before = process.env[PGLITE_TEMPLATE_ENV];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'bc-pglite-template-'));
  });
  afterAll(async () => {
    if (before === undefined) delete process.env[PGLITE_TEMPLATE_ENV];
    else process.env[PGLITE_TEMPLATE_ENV] = before;
    await rm(dir, { recursive: true, force: true });
  });

  it('writes the template on the first start, and every later database starts empty and apart from the others', async () => {
    const path = join(dir, 'nested', 'pglite.tar');
    process.env[PGLITE_TEMPLATE_ENV] = path;
    const first = await createPgliteDatabase();
    expect(existsSync(path)).toBe(true);
    await first.query('CREATE TABLE only_in_first (n int)');
    await first.query('INSERT INTO only_in_first VALUES (1)');
    const second = await createPgliteDatabase();
    const third = await createPgliteDatabase();
    try {
      const tables = async (db: typeof first) =>
        (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_tables WHERE tablename = 'only_in_first'"))
          .rows[0]?.n;
      expect([await tables(first), await tables(second), await tables(third)]).toEqual([1, 0, 0]);
      await second.query('CREATE TABLE only_in_second (big int8)');
      await second.query('INSERT INTO only_in_second VALUES (9007199254740991)');
      // The driver's own parsers hold on a database from the template (int8 as a number).
      expect((await second.query('SELECT big FROM only_in_second')).rows).toEqual([{ big: 9007199254740991 }]);
      expect(await tables(third)).toBe(0);
    } finally {
      await Promise.all([first.close(), second.close(), third.close()]);
    }
  });

  it('starts a new data directory from the template, keeps what is written there, and opens an existing one as it is', async () => {
    const path = join(dir, 'for-data-dirs.tar');
    process.env[PGLITE_TEMPLATE_ENV] = path;
    const dataDir = join(dir, 'data');
    const first = await createPgliteDatabase({ dataDir });
    expect(existsSync(path)).toBe(true);
    expect(existsSync(join(dataDir, 'PG_VERSION'))).toBe(true);
    await first.query('CREATE TABLE kept (n int)');
    await first.query('INSERT INTO kept VALUES (7)');
    await first.close();
    // Reopened: the template is not laid over the database the directory holds.
    const again = await createPgliteDatabase({ dataDir });
    try {
      expect((await again.query('SELECT n FROM kept')).rows).toEqual([{ n: 7 }]);
    } finally {
      await again.close();
    }
    // Another new directory starts empty from the template, which the first start wrote.
    const other = await createPgliteDatabase({ dataDir: join(dir, 'other') });
    try {
      expect((await other.query("SELECT count(*)::int AS n FROM pg_tables WHERE tablename = 'kept'")).rows).toEqual([
        { n: 0 },
      ]);
    } finally {
      await other.close();
    }
  });
});
