import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock';
import type { Reconciler } from '../../src/kernel/module';
import type { SqlDatabase } from '../../src/sql';
import {
  createWorkQueue,
  shardOf,
  startWorker,
  type WorkerHandle,
  type WorkerOptions,
  type WorkItemReport,
} from '../../src/work';
import { contextFactory, useWorkDatabase, waitFor } from '../fixtures/work-support';
import type { ScratchDatabase } from '../support/databases';

const SHARDS = 8;
const CLAIM = /^\s*WITH (relaxed AS MATERIALIZED .*?,\s*)?urgent_candidates AS/s;

/**
 * When a worker claims: only when a claim may find something (a notification, an item's known due time, a failure,
 * the poll floor), not after every pass. Every test polls rarely (pollMs 60 s unless it tests the floor), so only the
 * rule under test can make the item run in time.
 */
export function defineClaimWhenDueConformance(create: () => Promise<ScratchDatabase>): void {
  let db: SqlDatabase;
  let claims = 0;
  let lastClaim = '';
  const work = createWorkQueue({ clock: systemClock, shards: SHARDS });
  const makeContext = contextFactory(work);
  // The worker's handle: the database, with its claim statements counted.
  const counted = (): SqlDatabase => ({
    backend: db.backend,
    query: (text, params) => {
      if (CLAIM.test(text)) {
        claims += 1;
        lastClaim = text;
      }
      return db.query(text, params);
    },
    transaction: (fn) => db.transaction(fn),
    listen: (channel, handler) => db.listen(channel, handler),
    close: () => db.close(),
  });
  const enqueue = (kind: string, key: string) => db.transaction((tx) => work.enqueue(tx, { kind, key }));
  const start = (reconcilers: Record<string, Reconciler>, extra: Partial<WorkerOptions> = {}) =>
    startWorker({
      db: counted(),
      clock: systemClock,
      shards: SHARDS,
      reconcilers: new Map(Object.entries(reconcilers)),
      makeContext,
      pollMs: 60_000,
      heartbeatMs: 5_000,
      leaseMs: 15_000,
      ...extra,
    });
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  const stopAll: WorkerHandle[] = [];

  useWorkDatabase(create, {
    setup: (created) => {
      db = created;
    },
    reset: async () => {
      for (const worker of stopAll.splice(0)) await worker.stop();
      claims = 0;
      await db.query('TRUNCATE work_items, shard_leases, workers');
    },
  });

  describe('when a worker claims', () => {
    it('does not claim after a pass that requeued its item: it claims again when the item falls due', async () => {
      const runs: number[] = [];
      const reports: WorkItemReport[] = [];
      await enqueue('r', 'node_1');
      const worker = await start(
        {
          r: async () => {
            runs.push(Date.now());
            return runs.length === 1 ? { requeueAfterMs: 1_000 } : undefined;
          },
        },
        { onItem: (report) => reports.push(report) },
      );
      stopAll.push(worker);
      await waitFor('the first pass recorded', () => worker.stats().processed === 1);
      await pause(300);
      // One claim found the item; nothing was claimed after its pass, which said when it is due again.
      expect(claims).toBe(1);
      await waitFor('the second pass', () => worker.stats().processed === 2);
      expect((runs[1] ?? 0) - (runs[0] ?? 0)).toBeGreaterThanOrEqual(1_000);
      await pause(300);
      expect(claims).toBe(2);
      // The report says when the item is due again: the pass's finish plus its requeueAfterMs; nothing once done.
      const [first, second] = reports;
      expect(first?.outcome).toBe('requeued');
      expect(first?.requeueAt?.getTime()).toBeGreaterThanOrEqual((first?.startedAt.getTime() ?? 0) + 1_000);
      expect(first?.requeueAt?.getTime()).toBeLessThanOrEqual((first?.finishedAt.getTime() ?? 0) + 1_000);
      expect(second?.outcome).toBe('done');
      expect(second?.requeueAt).toBeUndefined();
    });

    it('claims on a notification, and not after a pass that ended its item', async () => {
      const seen: string[] = [];
      const worker = await start({ r: async (key) => void seen.push(key) });
      stopAll.push(worker);
      await pause(100);
      const idle = claims;
      await enqueue('r', 'node_2');
      await waitFor('the item handled', () => seen.length === 1);
      await pause(300);
      expect(claims).toBe(idle + 1);
      // A claim of its own commits without waiting for the disk (see ClaimFilter.relaxedCommit).
      expect(lastClaim).toContain("set_config('synchronous_commit', 'off', true)");
    });

    it('runs an item enqueued again while it ran right after its pass', async () => {
      let release: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let runs = 0;
      await enqueue('r', 'node_3');
      const worker = await start({
        r: async () => {
          runs += 1;
          if (runs === 1) await gate;
        },
      });
      stopAll.push(worker);
      await waitFor('the first pass running', () => runs === 1);
      await enqueue('r', 'node_3');
      // The notification's claim skips the busy key; the item is claimed again once its pass ends.
      await waitFor('a claim after the notification', () => claims >= 2);
      release();
      await waitFor('the second pass', () => runs === 2, 5_000);
    });

    it('retries a failed pass when its backoff ends', async () => {
      let runs = 0;
      await enqueue('r', 'node_4');
      const worker = await start(
        {
          r: async () => {
            runs += 1;
            if (runs === 1) throw new Error('first pass fails');
          },
        },
        { backoff: { baseMs: 200 } },
      );
      stopAll.push(worker);
      await waitFor('the retry recorded', () => worker.stats().processed === 2, 5_000);
      expect(runs).toBe(2);
      expect(worker.stats().byOutcome).toMatchObject({ failed: 1, done: 1 });
    });

    it('still claims once per pollMs, for an item whose notification was lost', async () => {
      const seen: string[] = [];
      const worker = await start({ r: async (key) => void seen.push(key) }, { pollMs: 200 });
      stopAll.push(worker);
      await pause(100);
      // Inserted without NOTIFY, as if the notification went with a dropped connection.
      await db.query(
        `INSERT INTO work_items (kind, key, shard, not_before, seq, attempts, urgent, created_at, updated_at)
         VALUES ('r', 'node_5', $1, now(), 1, 0, false, now(), now())`,
        [shardOf('node_5', SHARDS)],
      );
      await waitFor('the item handled by a poll', () => seen.length === 1, 5_000);
    });
  });
}
