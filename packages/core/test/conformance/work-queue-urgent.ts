import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock';
import type { Reconciler } from '../../src/kernel/module';
import type { SqlDatabase } from '../../src/sql';
import { createWorkQueue, parseWorkNotification, shardOf, startWorker, WORK_CHANNEL } from '../../src/work';
import { urgentReserve } from '../../src/work/claim-room';
import { claimDueItems } from '../../src/work/items';
import { contextFactory, useWorkDatabase, waitFor } from '../fixtures/work-support';
import type { ScratchDatabase } from '../support/databases';

const SHARDS = 8;

/** Urgent work in a busy worker: the claim's cap on routine items, urgent notifications, the slots kept for them. */
export function defineUrgentWorkConformance(create: () => Promise<ScratchDatabase>): void {
  let db: SqlDatabase;
  const work = createWorkQueue({ clock: systemClock, shards: SHARDS });
  const makeContext = contextFactory(work);
  const enqueue = (kind: string, key: string, urgent = false) =>
    db.transaction((tx) => work.enqueue(tx, { kind, key, urgent }));

  useWorkDatabase(create, {
    setup: (created) => {
      db = created;
    },
    reset: () => db.query('TRUNCATE work_items, shard_leases, workers'),
  });

  describe('urgent work', () => {
    it('a claim takes at most routineLimit routine items, every urgent one it has room for, and says which is which', async () => {
      for (const key of ['r1', 'r2', 'r3', 'r4']) await enqueue('k', key);
      for (const key of ['u1', 'u2']) await enqueue('k', key, true);
      const now = new Date(Date.now() + 1_000);
      const items = await claimDueItems(db, { claimant: 't', now, limit: 4, routineLimit: 1 });
      expect(items.map((i) => [i.key, i.urgent])).toEqual([
        ['u1', true],
        ['u2', true],
        ['r1', false],
      ]);
      const routineOnly = await claimDueItems(db, { claimant: 't', now, limit: 4, routineLimit: 0, busyKeys: [] });
      expect(routineOnly).toEqual([]);
      // Without a cap the claim fills its limit with routine items, as before.
      const filled = await claimDueItems(db, { claimant: 't', now, limit: 3 });
      expect(filled.map((i) => i.key)).toEqual(['r1', 'r2', 'r3']);
    });

    it('notifies the shard, followed by " urgent" for an urgent wake', async () => {
      const payloads: string[] = [];
      const stop = await db.listen(WORK_CHANNEL, (payload) => void payloads.push(payload));
      try {
        await enqueue('k', 'node_plain');
        await enqueue('k', 'node_hurry', true);
        await waitFor('both notifications', () => payloads.length >= 2);
      } finally {
        await stop();
      }
      expect(payloads).toEqual([`${shardOf('node_plain', SHARDS)}`, `${shardOf('node_hurry', SHARDS)} urgent`]);
      expect(payloads.map(parseWorkNotification)).toEqual([
        { shard: shardOf('node_plain', SHARDS), urgent: false },
        { shard: shardOf('node_hurry', SHARDS), urgent: true },
      ]);
    });

    it('a busy worker keeps a quarter of its slots for urgent items and claims an urgent wake at once', async () => {
      expect([1, 3, 4, 8, 16].map(urgentReserve)).toEqual([0, 0, 1, 2, 4]);
      let release: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      const running = new Set<string>();
      const reconcile: Reconciler = async (key) => {
        running.add(key);
        if (key.startsWith('slow')) await gate;
        running.delete(key);
      };
      for (let i = 0; i < 5; i += 1) await enqueue('k', `slow_${i}`);
      const worker = await startWorker({
        db,
        clock: systemClock,
        shards: SHARDS,
        reconcilers: new Map([['k', reconcile]]),
        makeContext,
        concurrency: 4,
        // Long polls: only the notification can make the urgent item run while the slow ones hold their slots.
        pollMs: 60_000,
        heartbeatMs: 5_000,
        leaseMs: 15_000,
      });
      try {
        await waitFor('three routine items running', () => running.size === 3);
        await enqueue('k', 'fast', true);
        await waitFor('the urgent item handled', () => worker.stats().processed === 1);
        // The fourth slot was kept for it: the two routine items left wait for the slow ones.
        expect(running.size).toBe(3);
        expect(worker.stats().inFlight).toBe(3);
        release();
        await waitFor('every item handled', () => worker.stats().processed === 6);
      } finally {
        release();
        await worker.stop();
      }
    });
  });
}
