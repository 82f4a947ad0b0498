import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ComputeError } from '../../src/errors';
import { isSqlError, sendNotifications } from '../../src/sql';
import type { ScratchDatabase } from '../support/databases';

/** The SqlExecutor contract, run once per backend. */
export function defineSqlExecutorConformance(create: () => Promise<ScratchDatabase>): void {
  let scratch: ScratchDatabase;
  beforeAll(async () => {
    scratch = await create();
    await scratch.db.query('CREATE TABLE t (id int PRIMARY KEY, v text, j jsonb, n int8, at timestamptz, tags text[])');
  });
  afterAll(async () => {
    await scratch?.drop();
  });

  describe('SqlExecutor', () => {
    it('returns rows and counts affected rows', async () => {
      const inserted = await scratch.db.query('INSERT INTO t (id, v) VALUES (1, $1), (2, $2)', ['a', 'b']);
      expect(inserted.rowCount).toBe(2);
      const { rows, rowCount } = await scratch.db.query<{ id: number; v: string }>('SELECT id, v FROM t ORDER BY id');
      expect(rows).toEqual([
        { id: 1, v: 'a' },
        { id: 2, v: 'b' },
      ]);
      expect(rowCount).toBe(2);
      await scratch.db.query('DELETE FROM t');
    });

    it('round-trips jsonb, int8 as a number, timestamptz as a Date and text arrays', async () => {
      const at = new Date('2026-01-02T03:04:05.678Z');
      await scratch.db.query('INSERT INTO t (id, j, n, at, tags) VALUES (1, $1::jsonb, $2, $3, $4::text[])', [
        JSON.stringify({ a: [1, 'x'] }),
        9_007_199_254,
        at,
        ['x', 'y'],
      ]);
      const { rows } = await scratch.db.query<{ j: unknown; n: number; at: Date; tags: string[] }>(
        'SELECT j, n, at, tags FROM t WHERE id = 1',
      );
      expect(rows[0]).toEqual({ j: { a: [1, 'x'] }, n: 9_007_199_254, at, tags: ['x', 'y'] });
      await scratch.db.query('DELETE FROM t');
    });

    it('commits a transaction that resolves and rolls back one that throws', async () => {
      await scratch.db.transaction((tx) => tx.query("INSERT INTO t (id, v) VALUES (1, 'kept')"));
      await expect(
        scratch.db.transaction(async (tx) => {
          await tx.query("INSERT INTO t (id, v) VALUES (2, 'lost')");
          throw new ComputeError('CONFLICT', 'no');
        }),
      ).rejects.toMatchObject({ code: 'CONFLICT' });
      const { rows } = await scratch.db.query<{ id: number }>('SELECT id FROM t ORDER BY id');
      expect(rows.map((r) => r.id)).toEqual([1]);
      await scratch.db.query('DELETE FROM t');
    });

    it('nests transactions as savepoints: an inner failure rolls back only the inner work', async () => {
      await scratch.db.transaction(async (tx) => {
        await tx.query("INSERT INTO t (id, v) VALUES (1, 'outer')");
        await expect(
          tx.transaction(async (inner) => {
            await inner.query("INSERT INTO t (id, v) VALUES (2, 'inner')");
            throw new Error('inner fails');
          }),
        ).rejects.toThrow('inner fails');
        await tx.transaction((inner) => inner.query("INSERT INTO t (id, v) VALUES (3, 'inner ok')"));
      });
      const { rows } = await scratch.db.query<{ id: number }>('SELECT id FROM t ORDER BY id');
      expect(rows.map((r) => r.id)).toEqual([1, 3]);
      await scratch.db.query('DELETE FROM t');
    });

    it('classifies a unique violation, keeping the constraint and the driver error as cause', async () => {
      await scratch.db.query('INSERT INTO t (id) VALUES (1)');
      const err = await scratch.db.query('INSERT INTO t (id) VALUES (1)').catch((e: unknown) => e);
      expect(isSqlError(err, 'unique-violation')).toBe(true);
      expect(err).toMatchObject({ sqlState: '23505', constraint: 't_pkey', retryable: false });
      expect((err as Error).cause).toBeDefined();
      await scratch.db.query('DELETE FROM t');
    });

    it('classifies a syntax error and an unknown table', async () => {
      expect(await scratch.db.query('SELEC 1').catch((e: unknown) => e)).toMatchObject({ reason: 'syntax-error' });
      expect(await scratch.db.query('SELECT * FROM nope').catch((e: unknown) => e)).toMatchObject({
        reason: 'undefined-object',
      });
    });

    it('leaves nothing half-written when a statement of a transaction fails', async () => {
      const err = await scratch.db
        .transaction(async (tx) => {
          await tx.query('INSERT INTO t (id) VALUES (10)');
          await tx.query('INSERT INTO t (id) VALUES (10)');
        })
        .catch((e: unknown) => e);
      expect(isSqlError(err, 'unique-violation')).toBe(true);
      const { rowCount } = await scratch.db.query('SELECT 1 FROM t WHERE id = 10');
      expect(rowCount).toBe(0);
    });

    it('delivers a NOTIFY sent in a transaction after it commits', async () => {
      const received: string[] = [];
      const stop = await scratch.db.listen('bc_conformance', (payload) => received.push(payload));
      await scratch.db.transaction((tx) => tx.query("SELECT pg_notify('bc_conformance', 'hello')"));
      for (let i = 0; i < 100 && received.length === 0; i += 1) await new Promise((r) => setTimeout(r, 10));
      await stop();
      expect(received).toEqual(['hello']);
    });

    it('sends notifications asked for in a transaction only once it commits, and none of a rolled-back scope', async () => {
      const received: string[] = [];
      const stop = await scratch.db.listen('bc_after_commit', (payload) => received.push(payload));
      const note = (payload: string) => [{ channel: 'bc_after_commit', payload }];
      // Waits until `last` arrives: whatever was sent before it has arrived by then.
      const until = async (last: string) => {
        for (let i = 0; i < 200 && !received.includes(last); i += 1) await new Promise((r) => setTimeout(r, 10));
      };
      const seenInside: string[][] = [];
      await scratch.db.transaction(async (tx) => {
        await tx.query("INSERT INTO t (id, v) VALUES (20, 'committed')");
        await sendNotifications(tx, note('committed'));
        await tx.transaction((inner) => sendNotifications(inner, note('released-savepoint')));
        await tx
          .transaction(async (inner) => {
            await sendNotifications(inner, note('rolled-back-savepoint'));
            throw new ComputeError('CONFLICT', 'undo the savepoint');
          })
          .catch(() => undefined);
        await new Promise((r) => setTimeout(r, 50));
        seenInside.push([...received]);
      });
      await expect(
        scratch.db.transaction(async (tx) => {
          await sendNotifications(tx, note('rolled-back'));
          throw new ComputeError('CONFLICT', 'undo the transaction');
        }),
      ).rejects.toMatchObject({ code: 'CONFLICT' });
      await sendNotifications(scratch.db, note('outside'));
      await until('outside');
      await stop();
      await scratch.db.query('DELETE FROM t');
      expect(seenInside).toEqual([[]]);
      expect(received).toEqual(['committed', 'released-savepoint', 'outside']);
    });
  });
}
