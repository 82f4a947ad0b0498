import type { ComputeModule, SqlExecutor } from '@better-compute/core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { crashingDatabase, createFakeClock, isWorkerCrashed, WorkerCrashed } from '../src';
import { rejection, type SharedDatabase, sharedDatabase } from './support/harness';

let shared: SharedDatabase;
beforeAll(async () => {
  shared = await sharedDatabase();
  await shared.db.query('CREATE TABLE crash_probe (key text PRIMARY KEY)');
});
afterAll(() => shared.close());
beforeEach(async () => {
  await shared.reset();
  await shared.db.query('TRUNCATE crash_probe');
});

const write = (sql: SqlExecutor, key: string) =>
  sql.query('INSERT INTO crash_probe (key) VALUES ($1) ON CONFLICT DO NOTHING', [key]);

async function probe(): Promise<string[]> {
  const { rows } = await shared.db.query<{ key: string }>('SELECT key FROM crash_probe ORDER BY key');
  return rows.map((row) => row.key);
}

async function expectDead(db: ReturnType<typeof crashingDatabase>): Promise<void> {
  expect(db.crashed).toBe(true);
  expect(await rejection(db.query('SELECT 1'))).toBeInstanceOf(WorkerCrashed);
  expect(await rejection(db.transaction((tx) => write(tx, 'late')))).toBeInstanceOf(WorkerCrashed);
  expect(await rejection(db.listen('bc_work', () => undefined))).toBeInstanceOf(WorkerCrashed);
  expect(await probe()).not.toContain('late');
}

describe('crashingDatabase', () => {
  it('with no plan only counts top-level transactions', async () => {
    const counting = crashingDatabase(shared.db, undefined);
    await counting.transaction((tx) => write(tx, 'a'));
    await counting.query('SELECT 1');
    await counting.transaction((tx) => write(tx, 'b'));
    expect(counting.boundaries).toBe(2);
    expect(counting.crashed).toBe(false);
    expect(await probe()).toEqual(['a', 'b']);
  });

  it('does not count nested savepoints', async () => {
    const counting = crashingDatabase(shared.db, undefined);
    await counting.transaction((tx) => tx.transaction((inner) => inner.transaction((deepest) => write(deepest, 'a'))));
    expect(counting.boundaries).toBe(1);
  });

  it('before-commit: the crashing transaction’s write is rolled back, and later calls throw WorkerCrashed', async () => {
    const crashing = crashingDatabase(shared.db, { at: 2, when: 'before-commit' });
    await crashing.transaction((tx) => write(tx, 'a'));
    const err = await rejection(crashing.transaction((tx) => write(tx, 'b')));
    expect(err).toBeInstanceOf(WorkerCrashed);
    expect((err as WorkerCrashed).boundary).toBe(2);
    expect(await probe()).toEqual(['a']);
    await expectDead(crashing);
  });

  it('after-commit: the crashing transaction’s write is committed, and later calls throw WorkerCrashed', async () => {
    const crashing = crashingDatabase(shared.db, { at: 1, when: 'after-commit' });
    const err = await rejection(crashing.transaction((tx) => write(tx, 'a')));
    expect(isWorkerCrashed(err)).toBe(true);
    expect(await probe()).toEqual(['a']);
    await expectDead(crashing);
  });

  it('dies at its boundary even when that transaction fails on its own, keeping the failure as the cause', async () => {
    const crashing = crashingDatabase(shared.db, { at: 1, when: 'after-commit' });
    const boom = new Error('boom');
    const err = await rejection(
      crashing.transaction(async (tx) => {
        await write(tx, 'a');
        throw boom;
      }),
    );
    expect(err).toBeInstanceOf(WorkerCrashed);
    expect((err as WorkerCrashed).cause).toBe(boom);
    expect(await probe()).toEqual([]);
    expect(crashing.crashed).toBe(true);
  });

  it('counts a top-level statement that writes as a boundary of its own, and a plain read as none', async () => {
    const counting = crashingDatabase(shared.db, undefined);
    await counting.query('SELECT 1');
    await counting.query("INSERT INTO crash_probe (key) VALUES ('a')");
    await counting.transaction((tx) => write(tx, 'b'));
    expect(counting.boundaries).toBe(2);
  });

  it.each([
    { when: 'before-commit' as const, written: [] },
    { when: 'after-commit' as const, written: ['a'] },
  ])(
    '$when at a lone statement: it runs only after the commit, and the worker is dead either way',
    async ({ when, written }) => {
      const crashing = crashingDatabase(shared.db, { at: 1, when });
      const err = await rejection(crashing.query("INSERT INTO crash_probe (key) VALUES ('a')"));
      expect(isWorkerCrashed(err)).toBe(true);
      expect((err as WorkerCrashed).boundary).toBe(1);
      expect(await probe()).toEqual(written);
      await expectDead(crashing);
    },
  );

  it('a transaction handle handed out before the crash throws too', async () => {
    const crashing = crashingDatabase(shared.db, { at: 1, when: 'before-commit' });
    let handle: SqlExecutor | undefined;
    await rejection(
      crashing.transaction(async (tx) => {
        handle = tx;
      }),
    );
    expect(await rejection((handle as SqlExecutor).query('SELECT 1'))).toBeInstanceOf(WorkerCrashed);
    expect(await rejection((handle as SqlExecutor).transaction(async () => undefined))).toBeInstanceOf(WorkerCrashed);
  });

  it('close does nothing: the underlying database lives on', async () => {
    const crashing = crashingDatabase(shared.db, undefined);
    await crashing.close();
    expect((await shared.db.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });

  it('refuses a plan that is not a boundary', () => {
    expect(() => crashingDatabase(shared.db, { at: 0, when: 'before-commit' })).toThrow(/plan\.at/);
    expect(() => crashingDatabase(shared.db, { at: 1, when: 'later' as never })).toThrow(/plan\.when/);
  });

  it('isWorkerCrashed knows a WorkerCrashed from another copy by its name', () => {
    const foreign = Object.assign(new Error('dead'), { name: 'WorkerCrashed' });
    expect(isWorkerCrashed(foreign)).toBe(true);
    expect(isWorkerCrashed(new Error('other'))).toBe(false);
    expect(isWorkerCrashed('WorkerCrashed')).toBe(false);
  });

  it.each([
    { when: 'before-commit' as const, afterCrash: [] },
    { when: 'after-commit' as const, afterCrash: ['k1'] },
  ])(
    'a worker crashing $when in a reconciler: a fresh worker on the same database finishes the item',
    async ({ when, afterCrash }) => {
      const clock = createFakeClock();
      const runs: string[] = [];
      const module: ComputeModule = {
        id: 'crash-test',
        reconcilers: {
          'test.write': async (key, ctx) => {
            runs.push(key);
            await ctx.sql.transaction((tx) => write(tx, key));
          },
        },
      };
      // How many boundaries a worker's startup takes on this (already migrated) database.
      const counting = crashingDatabase(shared.db, undefined);
      await shared.compute(clock, [module], counting);
      const startup = counting.boundaries;

      // The worker's claim of the item is a boundary (an autocommitted UPDATE); the reconciler's transaction is next.
      const crashing = crashingDatabase(shared.db, { at: startup + 2, when });
      const crashingWorker = await shared.compute(clock, [module], crashing);
      const fresh = await shared.compute(clock, [module]);
      await fresh.runDueWork(); // the kernel's sweep, so the reconciler's transaction is the next boundary
      await shared.db.transaction((tx) => fresh.context.work.enqueue(tx, { kind: 'test.write', key: 'k1' }));

      const err = await rejection(crashingWorker.runDueWork());
      expect(err).toBeInstanceOf(WorkerCrashed);
      expect((err as WorkerCrashed).boundary).toBe(startup + 2);
      expect(await probe()).toEqual(afterCrash);

      expect(await fresh.runDueWork()).toBe(1);
      expect(runs).toEqual(['k1', 'k1']);
      expect(await probe()).toEqual(['k1']);
      const { rows } = await shared.db.query("SELECT key FROM work_items WHERE kind = 'test.write'");
      expect(rows).toEqual([]);
    },
  );
});
