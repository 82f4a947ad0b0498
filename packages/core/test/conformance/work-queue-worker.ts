import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock';
import type { Reconciler } from '../../src/kernel/module';
import type { SqlDatabase } from '../../src/sql';
import { createWorkQueue, isFencedError, shardOf, startWorker, type WorkerOptions } from '../../src/work';
import { contextFactory, useWorkDatabase, waitFor } from '../fixtures/work-support';
import type { ScratchDatabase } from '../support/databases';

const SHARDS = 8;

/** One worker against one backend: claiming, one key at a time, fencing, graceful stop. */
export function defineWorkerConformance(create: () => Promise<ScratchDatabase>): void {
  let db: SqlDatabase;
  const work = createWorkQueue({ clock: systemClock, shards: SHARDS });
  const makeContext = contextFactory(work);

  const enqueue = (kind: string, key: string) => db.transaction((tx) => work.enqueue(tx, { kind, key }));
  const itemCount = async () => (await db.query('SELECT 1 FROM work_items')).rowCount;
  const start = (reconcilers: Record<string, Reconciler>, extra: Partial<WorkerOptions> = {}) =>
    startWorker({
      db,
      clock: systemClock,
      shards: SHARDS,
      reconcilers: new Map(Object.entries(reconcilers)),
      makeContext,
      leaseMs: 1_500,
      heartbeatMs: 100,
      pollMs: 50,
      ...extra,
    });

  useWorkDatabase(create, {
    setup: async (created) => {
      db = created;
      await db.query('CREATE TABLE fence_probe (key text PRIMARY KEY)');
    },
    reset: () => db.query('TRUNCATE work_items, shard_leases, workers, fence_probe'),
  });

  describe('worker', () => {
    it('holds every shard alone, runs an enqueued item, and on stop releases its leases and leaves the live set', async () => {
      const seen: string[] = [];
      const worker = await start({ r: async (key) => void seen.push(key) });
      expect(worker.stats().shards).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      await enqueue('r', 'node_1');
      await waitFor('the item to be handled and deleted', async () => seen.length === 1 && (await itemCount()) === 0);
      await worker.stop();
      await worker.stop();
      expect(worker.stats()).toMatchObject({ processed: 1, byOutcome: { done: 1 }, shards: [] });
      const leases = await db.query<{ worker_id: string | null }>('SELECT worker_id FROM shard_leases');
      expect(leases.rows).toHaveLength(SHARDS);
      expect(leases.rows.every((r) => r.worker_id === null)).toBe(true);
      const row = await db.query<{ stopped_at: Date | null }>('SELECT stopped_at FROM workers WHERE id = $1', [
        worker.id,
      ]);
      expect(row.rows[0]?.stopped_at).toBeInstanceOf(Date);
    });

    it('gives a reconciler the lease it processes the item under (ctx.lease), the one commit fences with', async () => {
      let seen: unknown;
      const worker = await start({
        r: async (_key, ctx) => {
          seen = ctx.lease;
        },
      });
      await enqueue('r', 'node_1');
      await waitFor('the item to be handled', () => seen !== undefined);
      await worker.stop();
      expect(seen).toEqual({ workerId: worker.id, shard: shardOf('node_1', SHARDS), epoch: expect.any(Number) });
    });

    it('never runs two items with the same key at once, across kinds', async () => {
      const active = new Map<string, number>();
      let overlap = 0;
      let handled = 0;
      const reconcile: Reconciler = async (key) => {
        const n = (active.get(key) ?? 0) + 1;
        active.set(key, n);
        if (n > 1) overlap += 1;
        await new Promise((resolve) => setTimeout(resolve, 20));
        active.set(key, n - 1);
        handled += 1;
      };
      for (const kind of ['a', 'b', 'c', 'd']) {
        await enqueue(kind, 'node_same');
        await enqueue(kind, `node_${kind}`);
      }
      const worker = await start({ a: reconcile, b: reconcile, c: reconcile, d: reconcile }, { concurrency: 8 });
      await waitFor('all eight items', () => handled === 8);
      await worker.stop();
      expect(overlap).toBe(0);
      expect(await itemCount()).toBe(0);
    });

    it('finishes a batch of items together, keeping and rerunning the one enqueued again while it ran', async () => {
      const runs = new Map<string, number>();
      const keys = Array.from({ length: 12 }, (_, i) => `node_b${i}`);
      const reconcile: Reconciler = async (key) => {
        const n = (runs.get(key) ?? 0) + 1;
        runs.set(key, n);
        // Every item finishes at about the same moment, so their completions share a batch.
        await new Promise((resolve) => setTimeout(resolve, 30));
        if (key === 'node_b3' && n === 1) await enqueue('batch', key);
      };
      for (const key of keys) await enqueue('batch', key);
      const worker = await start({ batch: reconcile }, { concurrency: 16 });
      await waitFor('every item handled and the queue empty', async () => {
        const total = [...runs.values()].reduce((a, b) => a + b, 0);
        return total === keys.length + 1 && (await itemCount()) === 0;
      });
      await worker.stop();
      expect(runs.get('node_b3')).toBe(2);
      expect(keys.filter((key) => key !== 'node_b3').every((key) => runs.get(key) === 1)).toBe(true);
    });

    it('records nothing for a pass that deleted its own item (doneWritten), which it claimed at ctx.item.seq', async () => {
      const seen: unknown[] = [];
      const reconcile: Reconciler = async (key, ctx) => {
        seen.push(ctx.item);
        const { rowCount } = await db.query('DELETE FROM work_items WHERE kind = $1 AND key = $2 AND seq = $3', [
          ctx.item?.kind,
          key,
          ctx.item?.seq,
        ]);
        return rowCount === 1 ? { doneWritten: true } : undefined;
      };
      await enqueue('self', 'node_self');
      const worker = await start({ self: reconcile });
      await waitFor('the pass', async () => seen.length === 1 && (await itemCount()) === 0);
      await worker.stop();
      expect(seen).toEqual([{ kind: 'self', key: 'node_self', seq: expect.anything() }]);
      expect(worker.stats().byOutcome).toMatchObject({ done: 1, failed: 0, fenced: 0 });
    });

    it('records requeued passes in the batch: due after their delay, or at once if enqueued while they ran', async () => {
      const runs = new Map<string, number>();
      const keys = Array.from({ length: 8 }, (_, i) => `node_r${i}`);
      const reconcile: Reconciler = async (key) => {
        const n = (runs.get(key) ?? 0) + 1;
        runs.set(key, n);
        await new Promise((resolve) => setTimeout(resolve, 30));
        if (n > 1) return undefined;
        if (key === 'node_r5') await db.transaction((tx) => work.enqueue(tx, { kind: 'requeue', key, urgent: true }));
        return { requeueAfterMs: 60_000 };
      };
      for (const key of keys) await enqueue('requeue', key);
      const before = Date.now();
      const worker = await start({ requeue: reconcile }, { concurrency: 16 });
      await waitFor('node_r5 run again and deleted, the others requeued', async () => {
        const { rows } = await db.query<{ key: string; claimed_by: string | null }>(
          "SELECT key, claimed_by FROM work_items WHERE kind = 'requeue'",
        );
        return runs.get('node_r5') === 2 && rows.length === 7 && rows.every((r) => r.claimed_by === null);
      });
      const { rows } = await db.query<{ key: string; not_before: Date; urgent: boolean; attempts: number }>(
        "SELECT key, not_before, urgent, attempts FROM work_items WHERE kind = 'requeue' ORDER BY key",
      );
      await worker.stop();
      expect(rows.map((r) => r.key)).toEqual(keys.filter((key) => key !== 'node_r5'));
      for (const row of rows) {
        expect(row.not_before.getTime()).toBeGreaterThanOrEqual(before + 60_000);
        expect(row).toMatchObject({ urgent: false, attempts: 0 });
      }
      expect(worker.stats().byOutcome).toMatchObject({ requeued: 8, done: 1, fenced: 0 });
    });

    it('finishes the items in flight before stop resolves', async () => {
      let finished = false;
      let started = false;
      const worker = await start({
        slow: async () => {
          started = true;
          await new Promise((resolve) => setTimeout(resolve, 300));
          finished = true;
        },
      });
      await enqueue('slow', 'node_slow');
      await waitFor('the reconciler to start', () => started);
      await worker.stop();
      expect(finished).toBe(true);
      expect(worker.stats().byOutcome).toMatchObject({ done: 1, fenced: 0 });
      expect(await itemCount()).toBe(0);
    });

    it('lets every item in flight listen on ctx.signal without a listener-leak warning, and stops them all', async () => {
      const warnings: string[] = [];
      const onWarning = (warning: Error) => warnings.push(warning.name);
      process.on('warning', onWarning);
      let listening = 0;
      let stoppedEarly = 0;
      const worker = await start(
        {
          wait: async (_key, ctx) => {
            listening += 1;
            await new Promise<void>((resolve) =>
              ctx.signal?.addEventListener('abort', () => resolve(), { once: true }),
            );
            stoppedEarly += 1;
          },
        },
        { concurrency: 40 },
      );
      try {
        // Twelve routine items, well inside the worker's room for them. Node warns past ten listeners.
        for (let i = 0; i < 12; i++) await enqueue('wait', `node_${i}`);
        await waitFor('12 items in flight', () => listening === 12);
        await worker.stop();
        // Warnings are emitted on the next tick.
        await new Promise((resolve) => setImmediate(resolve));
        expect(stoppedEarly).toBe(12);
        expect(warnings.filter((name) => name === 'MaxListenersExceededWarning')).toEqual([]);
      } finally {
        process.off('warning', onWarning);
        await worker.stop();
      }
    });

    it('fences a worker whose lease was taken: its transaction fails, nothing is committed, the item stays', async () => {
      let release: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let started = false;
      let failure: unknown;
      const worker = await start({
        gated: async (key, ctx) => {
          started = true;
          await gate;
          try {
            await ctx.sql.transaction((tx) => tx.query('INSERT INTO fence_probe (key) VALUES ($1)', [key]));
          } catch (err) {
            failure = err;
            throw err;
          }
        },
      });
      await enqueue('gated', 'node_f');
      await waitFor('the reconciler to start', () => started);
      // Another worker takes the shard over (what a takeover after expiry does: new holder, next epoch).
      await db.query(
        `UPDATE shard_leases SET worker_id = 'intruder', epoch = epoch + 1, expires_at = $2 WHERE shard = $1`,
        [shardOf('node_f', SHARDS), new Date(Date.now() + 3_600_000)],
      );
      release();
      await waitFor('the fenced outcome', () => worker.stats().byOutcome.fenced === 1);
      expect(isFencedError(failure)).toBe(true);
      expect(failure).toMatchObject({ code: 'INVALID_STATE', details: { reason: 'fenced' } });
      expect((await db.query('SELECT 1 FROM fence_probe')).rowCount).toBe(0);
      const { rows } = await db.query<{ attempts: number }>('SELECT attempts FROM work_items WHERE key = $1', [
        'node_f',
      ]);
      expect(rows).toEqual([{ attempts: 0 }]);
      await waitFor(
        'the worker to drop the lost shard',
        () => !worker.stats().shards.includes(shardOf('node_f', SHARDS)),
      );
      await worker.stop();
      const lease = await db.query<{ worker_id: string }>('SELECT worker_id FROM shard_leases WHERE shard = $1', [
        shardOf('node_f', SHARDS),
      ]);
      expect(lease.rows[0]?.worker_id).toBe('intruder');
    });

    it('records nothing for a requeued pass whose shard was taken meanwhile: fenced, the item left as it was', async () => {
      let release: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let started = false;
      const worker = await start({
        gated: async () => {
          started = true;
          await gate;
          return { requeueAfterMs: 60_000 };
        },
      });
      await enqueue('gated', 'node_q');
      await waitFor('the reconciler to start', () => started);
      const before = await db.query<{ not_before: Date; claimed_by: string }>(
        'SELECT not_before, claimed_by FROM work_items WHERE key = $1',
        ['node_q'],
      );
      await db.query(
        `UPDATE shard_leases SET worker_id = 'intruder', epoch = epoch + 1, expires_at = $2 WHERE shard = $1`,
        [shardOf('node_q', SHARDS), new Date(Date.now() + 3_600_000)],
      );
      release();
      await waitFor('the fenced outcome', () => worker.stats().byOutcome.fenced === 1);
      await worker.stop();
      const after = await db.query('SELECT not_before, claimed_by FROM work_items WHERE key = $1', ['node_q']);
      expect(after.rows).toEqual(before.rows);
      expect(worker.stats().byOutcome.requeued).toBe(0);
    });

    it('refuses bad options with INVALID_CONFIG naming the option', async () => {
      await expect(start({}, { heartbeatMs: 2_000, leaseMs: 1_000 })).rejects.toMatchObject({
        code: 'INVALID_CONFIG',
        details: { path: ['heartbeatMs'] },
      });
      await expect(start({}, { concurrency: 0 })).rejects.toMatchObject({ details: { path: ['concurrency'] } });
      await expect(start({}, { shards: 0 })).rejects.toMatchObject({ details: { path: ['shards'] } });
      await expect(
        startWorker({ db, reconcilers: {} as unknown as Map<string, Reconciler>, makeContext }),
      ).rejects.toMatchObject({ details: { path: ['reconcilers'] } });
      expect((await db.query('SELECT 1 FROM workers')).rowCount).toBe(0);
    });
  });
}
