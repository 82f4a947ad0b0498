import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPgliteDatabase } from '../../src/pglite';
import { isSqlError, type SqlDatabase } from '../../src/sql';

describe('the PGlite transaction limit', () => {
  let db: SqlDatabase;
  beforeAll(async () => {
    db = await createPgliteDatabase({ transactionTimeoutMs: 300 });
    await db.query('CREATE TABLE t (id int PRIMARY KEY)');
  });
  afterAll(async () => {
    await db.close();
  });

  it('rolls back a transaction that holds the connection past the limit and hands the connection on', async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const stuck = db
      .transaction(async (tx) => {
        await tx.query('INSERT INTO t VALUES (1)');
        await held;
        await tx.query('INSERT INTO t VALUES (2)');
      })
      .catch((err: unknown) => err);
    // Queued behind the stuck transaction: it runs once the limit hands the connection on, with nothing of it kept.
    const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM t');
    expect(rows).toEqual([{ n: 0 }]);
    release();
    const error = await stuck;
    expect(isSqlError(error, 'connection-lost')).toBe(true);
    expect((error as { retryable: boolean }).retryable).toBe(true);
    expect((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM t')).rows).toEqual([{ n: 0 }]);
  });

  it('fails the end of an expired transaction whose callback resolves, instead of committing it', async () => {
    const error = await db
      .transaction(async (tx) => {
        await tx.query('INSERT INTO t VALUES (3)');
        await new Promise((resolve) => setTimeout(resolve, 600));
        return 'done';
      })
      .catch((err: unknown) => err);
    expect(isSqlError(error, 'connection-lost')).toBe(true);
    expect((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM t')).rows).toEqual([{ n: 0 }]);
  });

  it('commits a transaction that ends within the limit', async () => {
    await db.transaction(async (tx) => {
      await tx.query('INSERT INTO t VALUES (4)');
      await tx.transaction((inner) => inner.query('INSERT INTO t VALUES (5)'));
    });
    expect((await db.query<{ id: number }>('SELECT id FROM t ORDER BY id')).rows).toEqual([{ id: 4 }, { id: 5 }]);
    await db.query('DELETE FROM t');
  });

  it('refuses a limit that is not a whole number of milliseconds', async () => {
    await expect(createPgliteDatabase({ transactionTimeoutMs: -5 })).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['transactionTimeoutMs'] },
    });
  });
});
