import { describe, expect, it } from 'vitest';
import type { ModuleContext, Reconciler } from '../../src/kernel/module';
import type { SqlDatabase } from '../../src/sql';
import { createWorkQueue, runDueWork, startWorker } from '../../src/work';
import type { ReconcileResult } from '../../src/work/types';
import { contextFactory, fakeClock, recordingLogger, useWorkDatabase, waitFor } from '../fixtures/work-support';
import type { ScratchDatabase } from '../support/databases';

const SHARDS = 8;

/**
 * Parked work items (`WorkPark`, `ReconcilerPark`): a requeued pass that says what it waits on is looked at by the
 * claims, in SQL, and runs again only once that wait is over, it is woken, or its `until` comes.
 */
export function defineWorkQueueParkConformance(create: () => Promise<ScratchDatabase>): void {
  let db: SqlDatabase;
  const clock = fakeClock();
  const work = createWorkQueue({ clock, shards: SHARDS });
  const makeContext = contextFactory(work, clock);
  let passes: string[] = [];
  // What the next pass of each key returns (a park on the probe row `key`, by default).
  let answer: (key: string) => ReconcileResult = () => undefined;

  // Still waiting while the probe row named by `on.probe` is open.
  const parkSql = (on: string) => `EXISTS (SELECT 1 FROM park_probe p WHERE p.key = ${on}->>'probe' AND p.open)`;
  const reconcile = async (key: string, _ctx: ModuleContext) => {
    passes.push(key);
    return answer(key);
  };
  const parking: Reconciler = Object.assign(reconcile, { park: { sql: parkSql } });
  const plain: Reconciler = async (key) => {
    passes.push(key);
    return answer(key);
  };
  const parkOn = (key: string, extra: { everyMs?: number; until?: Date } = {}): ReconcileResult => ({
    requeueAfterMs: 1_000,
    park: { on: { probe: key }, ...extra },
  });
  const setProbe = (key: string, open: boolean) =>
    db.query('INSERT INTO park_probe (key, open) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET open = $2', [
      key,
      open,
    ]);
  const enqueue = (key: string) => db.transaction((tx) => work.enqueue(tx, { kind: 'parked', key }));
  const run = (reconciler: Reconciler = parking, log = recordingLogger()) =>
    runDueWork({ db, clock, reconcilers: new Map([['parked', reconciler]]), makeContext, log });
  const item = async (key: string) => {
    const { rows } = await db.query<{ not_before: Date; park_on: unknown }>(
      "SELECT not_before, park_on FROM work_items WHERE kind = 'parked' AND key = $1",
      [key],
    );
    return rows[0];
  };
  /** Starts an item parked on its open probe row: one pass, which asks to be parked. */
  const parkedItem = async (key: string, extra: { everyMs?: number; until?: Date } = {}) => {
    await setProbe(key, true);
    answer = (k) => parkOn(k, extra);
    await enqueue(key);
    expect(await run()).toBe(1);
    passes = [];
  };

  useWorkDatabase(create, {
    setup: async (created) => {
      db = created;
      await db.query('CREATE TABLE park_probe (key text PRIMARY KEY, open boolean NOT NULL)');
    },
    reset: async () => {
      await db.query('TRUNCATE work_items, shard_leases, workers, park_probe');
      passes = [];
      answer = () => undefined;
    },
  });

  describe('parked work items', () => {
    it('postpones a due parked item by everyMs without a pass while its wait holds', async () => {
      await parkedItem('a', { everyMs: 5_000 });
      expect((await item('a'))?.not_before.getTime()).toBe(clock.now().getTime() + 1_000);
      clock.advance(1_000);
      expect(await run()).toBe(0);
      expect(passes).toEqual([]);
      expect((await item('a'))?.not_before.getTime()).toBe(clock.now().getTime() + 5_000);
      clock.advance(5_000);
      expect(await run()).toBe(0);
      expect(passes).toEqual([]);
    });

    it('runs the pass at its next look once the wait is over', async () => {
      await parkedItem('a');
      await setProbe('a', false);
      answer = () => undefined;
      clock.advance(1_000);
      expect(await run()).toBe(1);
      expect(passes).toEqual(['a']);
      expect(await item('a')).toBeUndefined();
    });

    it('runs the pass at once when the item is woken, and the wake unparks it', async () => {
      await parkedItem('a');
      await enqueue('a');
      expect((await item('a'))?.park_on).toBeNull();
      answer = () => undefined;
      expect(await run()).toBe(1);
      expect(passes).toEqual(['a']);
    });

    it('never postpones past until: from then on the item is claimed', async () => {
      const until = new Date(clock.now().getTime() + 2_500);
      await parkedItem('a', { everyMs: 2_000, until });
      clock.advance(1_000);
      expect(await run()).toBe(0);
      expect((await item('a'))?.not_before.getTime()).toBe(until.getTime());
      clock.set(until);
      answer = () => undefined;
      expect(await run()).toBe(1);
      expect(passes).toEqual(['a']);
    });

    it('does not park a pass when the item was woken while that pass ran', async () => {
      await setProbe('a', true);
      await enqueue('a');
      answer = (key) => parkOn(key);
      const wokenDuringPass: Reconciler = Object.assign(
        async (key: string, ctx: ModuleContext) => {
          await enqueue(key);
          return reconcile(key, ctx);
        },
        { park: { sql: parkSql } },
      );
      expect(await run(wokenDuringPass)).toBe(1);
      expect((await item('a'))?.park_on).toBeNull();
      passes = [];
      answer = () => undefined;
      expect(await run()).toBe(1);
      expect(passes).toEqual(['a']);
    });

    it('claims a parked item of a kind without a park as any other', async () => {
      await parkedItem('a');
      clock.advance(1_000);
      answer = () => undefined;
      expect(await run(plain)).toBe(1);
      expect(passes).toEqual(['a']);
    });

    it('ignores the park a kind without a park SQL returns: its item is a plain requeue', async () => {
      await setProbe('a', true);
      answer = (key) => parkOn(key);
      await enqueue('a');
      expect(await run(plain)).toBe(1);
      expect((await item('a'))?.park_on).toBeNull();
    });

    it('fails a pass that returns a malformed park, naming the field', async () => {
      await enqueue('a');
      answer = () => ({ requeueAfterMs: 1_000, park: { on: { probe: 'a' }, everyMs: 0 } });
      const log = recordingLogger();
      expect(await run(parking, log)).toBe(1);
      const { rows } = await db.query<{ attempts: number; last_error: string }>(
        "SELECT attempts, last_error FROM work_items WHERE key = 'a'",
      );
      expect(rows[0]?.attempts).toBe(1);
      expect(rows[0]?.last_error).toContain('everyMs');
    });

    it('parks under a worker too: the batch finish stores the park, and the claims do the looks', async () => {
      await setProbe('a', true);
      answer = (key) => parkOn(key, { everyMs: 60_000 });
      await enqueue('a');
      const reconcilers = new Map([['parked', parking]]);
      const log = recordingLogger();
      const worker = await startWorker({ db, clock, shards: SHARDS, reconcilers, makeContext, log, pollMs: 20 });
      try {
        await waitFor('the first pass', () => passes.length > 0);
        await waitFor('the park to be stored', async () => (await item('a'))?.park_on !== null);
        clock.advance(1_000);
        await waitFor('the look to postpone it', async () => {
          const found = await item('a');
          return found?.not_before.getTime() === clock.now().getTime() + 60_000;
        });
        expect(passes).toEqual(['a']);
        expect(log.lines.filter((l) => l.level === 'error')).toEqual([]);
      } finally {
        await worker.stop();
      }
    });

    it("drops at a worker's start a park whose SQL fails its check, and runs that kind's passes", async () => {
      const broken: Reconciler = Object.assign(reconcile, { park: { sql: () => 'no_such_column IS TRUE' } });
      await parkedItem('a');
      clock.advance(1_000);
      answer = () => undefined;
      const log = recordingLogger();
      const reconcilers = new Map([['parked', broken]]);
      const worker = await startWorker({ db, clock, shards: SHARDS, reconcilers, makeContext, log, pollMs: 20 });
      try {
        await waitFor('the pass', () => passes.length > 0);
        expect(log.lines.find((l) => l.message.includes('park failed its check'))).toMatchObject({
          level: 'error',
          fields: { kind: 'parked' },
        });
      } finally {
        await worker.stop();
      }
    });

    it('turns parks off when a claim fails with them, and claims that kind when due', async () => {
      const broken: Reconciler = Object.assign(reconcile, { park: { sql: () => 'no_such_column IS TRUE' } });
      await parkedItem('a');
      clock.advance(1_000);
      answer = () => undefined;
      const log = recordingLogger();
      expect(await run(broken, log)).toBe(1);
      expect(passes).toEqual(['a']);
      expect(log.lines.find((l) => l.message.includes('are off for this worker'))).toMatchObject({
        level: 'error',
        fields: { parkKinds: ['parked'] },
      });
    });
  });
}
