import { createPostgresDatabase } from '@better-compute/core/postgres';
import { describe, expect, it } from 'vitest';
import { createScratchDatabase, scratchBackends } from '../src';

const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL;

describe('createScratchDatabase', () => {
  it('without a url opens an empty in-memory PGlite, refuses a second handle, and closes on drop', async () => {
    const scratch = await createScratchDatabase();
    expect(scratch.url).toBeUndefined();
    const { rows } = await scratch.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'",
    );
    expect(rows).toEqual([{ n: 0 }]);
    expect(() => scratch.connect()).toThrow(/one connection/);
    await scratch.drop();
    await expect(scratch.db.query('SELECT 1')).rejects.toThrow();
  });

  it.runIf(TEST_DATABASE_URL)(
    'with a url creates a fresh database on that server, shared by every handle, and drops it',
    async () => {
      const server = createPostgresDatabase({ url: TEST_DATABASE_URL ?? '', max: 1 });
      const exists = async (url: string) => {
        const name = new URL(url).pathname.slice(1);
        const { rows } = await server.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
        return rows.length === 1;
      };
      try {
        const first = await createScratchDatabase({ url: TEST_DATABASE_URL });
        const second = await createScratchDatabase({ url: TEST_DATABASE_URL });
        const url = first.url ?? '';
        expect(url).toMatch(/\/bc_test_[0-9a-z]{26}$/);
        expect(second.url).not.toBe(url);
        expect(await exists(url)).toBe(true);

        await first.db.query('CREATE TABLE t (v int)');
        await first.db.query('INSERT INTO t VALUES (1)');
        const other = first.connect({ max: 2 });
        expect((await other.query('SELECT v FROM t')).rows).toEqual([{ v: 1 }]);
        // Each scratch database is its own: the second does not see the first's table.
        await expect(second.db.query('SELECT v FROM t')).rejects.toThrow();

        await first.drop();
        await second.drop();
        expect(await exists(url)).toBe(false);
        await expect(other.query('SELECT 1')).rejects.toThrow();
      } finally {
        await server.close();
      }
    },
  );
});

describe('scratchBackends', () => {
  it('lists PGlite always and PostgreSQL only with a url', () => {
    expect(scratchBackends(undefined).map((b) => b.name)).toEqual(['pglite']);
    expect(scratchBackends('postgres://postgres@127.0.0.1:5432/test').map((b) => b.name)).toEqual([
      'pglite',
      'postgres',
    ]);
  });
});
