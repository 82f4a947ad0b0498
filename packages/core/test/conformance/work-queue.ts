import { beforeEach, describe, expect, it } from 'vitest';
import { defineWorkQueueBehaviour } from '../../src/conformance';
import { ComputeError } from '../../src/errors';
import type { Reconciler } from '../../src/kernel/module';
import type { SqlDatabase } from '../../src/sql';
import { createWorkQueue, isFencedError, runDueWork, shardOf, URGENT_LEAD_MS } from '../../src/work';
import { requeueItemSql } from '../../src/work/finish';
import { claimDueItemsAndNext } from '../../src/work/items';
import { contextFactory, fakeClock, recordingLogger, useWorkDatabase } from '../fixtures/work-support';
import type { ScratchDatabase } from '../support/databases';

const SHARDS = 8;

interface ItemRow {
  kind: string;
  key: string;
  shard: number;
  not_before: Date;
  seq: number;
  attempts: number;
  last_error: string | null;
  claimed_by: string | null;
}

/** The work queue contract (enqueue, runDueWork, results, backoff), run once per backend. */
export function defineWorkQueueConformance(create: () => Promise<ScratchDatabase>): void {
  let db: SqlDatabase;
  const clock = fakeClock();
  const work = createWorkQueue({ clock, shards: SHARDS });
  const makeContext = contextFactory(work, clock);
  const t0 = new Date('2026-03-01T00:00:00.000Z');
  const at = (ms: number) => new Date(t0.getTime() + ms);

  const enqueue = (kind: string, key: string, notBefore?: Date) =>
    db.transaction((tx) => work.enqueue(tx, { kind, key, ...(notBefore ? { notBefore } : {}) }));
  const item = async (kind: string, key: string) =>
    (await db.query<ItemRow>('SELECT * FROM work_items WHERE kind = $1 AND key = $2', [kind, key])).rows[0];
  const run = (reconcilers: Record<string, Reconciler>, extra: Partial<Parameters<typeof runDueWork>[0]> = {}) =>
    runDueWork({ db, clock, reconcilers: new Map(Object.entries(reconcilers)), makeContext, ...extra });

  useWorkDatabase(create, {
    setup: (created) => {
      db = created;
    },
    reset: async () => {
      await db.query('TRUNCATE work_items, shard_leases, workers');
      clock.set(t0);
    },
  });

  // What any WorkQueue shares (the testkit's in-memory queue runs it too); the rest of this file needs SQL.
  defineWorkQueueBehaviour({ describe, it, beforeEach, expect }, async () => ({
    queue: work,
    transaction: (fn) => db.transaction(fn),
    clock,
    items: async () =>
      (
        await db.query<{ kind: string; key: string; not_before: Date; urgent: boolean }>(
          'SELECT kind, key, not_before, urgent FROM work_items',
        )
      ).rows.map((r) => ({ kind: r.kind, key: r.key, notBefore: r.not_before, urgent: r.urgent })),
  }));

  describe('work queue', () => {
    it('keeps one row per (kind, key) with the earliest notBefore, and the shard of the key', async () => {
      await enqueue('workflow', 'node_a', at(10_000));
      await enqueue('workflow', 'node_a', at(5_000));
      await enqueue('workflow', 'node_a', at(20_000));
      await enqueue('health', 'node_a');
      const row = await item('workflow', 'node_a');
      expect(row).toMatchObject({ not_before: at(5_000), seq: 3, shard: shardOf('node_a', SHARDS), attempts: 0 });
      // Omitted notBefore is the Clock's now; the kind does not change the shard.
      expect(await item('health', 'node_a')).toMatchObject({ not_before: t0, shard: row?.shard });
      const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM work_items');
      expect(rows[0]?.n).toBe(2);
    });

    it('computes the same shard in SQL (work_shard_of) as shardOf, for any key and shard count', async () => {
      const keys = [
        '',
        'a',
        'node_a',
        'node_01k9z3xq7v0d3ts1m2b4c5e6f7',
        'nœud-ü',
        '機械-7',
        '🖥️ rack 3',
        'x'.repeat(512),
      ];
      const counts = [1, 7, 64, 1000, 65_536];
      const { rows } = await db.query<{ key: string; shards: number; shard: number }>(
        `SELECT k AS key, n AS shards, work_shard_of(k, n) AS shard
         FROM unnest($1::text[]) AS k CROSS JOIN unnest($2::int[]) AS n`,
        [keys, counts],
      );
      expect(rows).toHaveLength(keys.length * counts.length);
      for (const row of rows) expect(row.shard, `${row.key} mod ${row.shards}`).toBe(shardOf(row.key, row.shards));
    });

    it('a claim with relaxedCommit turns synchronous_commit off for its own transaction only', async () => {
      await enqueue('workflow', 'node_r');
      const settingAfter = (relaxedCommit: boolean) =>
        db.transaction(async (tx) => {
          await claimDueItemsAndNext(tx, { claimant: 'w', now: clock.now(), limit: 1, relaxedCommit });
          return (await tx.query<{ s: string }>("SELECT current_setting('synchronous_commit') AS s")).rows[0]?.s;
        });
      expect(await settingAfter(false)).toBe('on');
      // Inside a caller's transaction (as no worker does it) the relaxation would reach the caller's commit: it lasts
      // exactly as long as the claim's transaction.
      expect(await settingAfter(true)).toBe('off');
      const { rows } = await db.query<{ s: string }>("SELECT current_setting('synchronous_commit') AS s");
      expect(rows[0]?.s).toBe('on');
    });

    it('claims an urgent item ahead of routine items due less than URGENT_LEAD_MS before it, not of older ones', async () => {
      const seen: string[] = [];
      await enqueue('r', 'old', at(-URGENT_LEAD_MS - 1_000));
      await enqueue('r', 'recent', at(-URGENT_LEAD_MS + 1_000));
      await db.transaction((tx) => work.enqueue(tx, { kind: 'r', key: 'result', urgent: true }));
      await enqueue('r', 'routine-now');
      await run({ r: async (key) => void seen.push(key) });
      expect(seen).toEqual(['old', 'result', 'recent', 'routine-now']);
    });

    it('a claim also reads when the next item of its shards falls due, leaving out busy and just-claimed keys', async () => {
      await enqueue('r', 'due', at(-1_000));
      await enqueue('other', 'due', at(2_000)); // the same key as a claimed item: not next
      await enqueue('r', 'busy', at(1_000));
      await enqueue('r', 'next', at(5_000));
      await enqueue('r', 'last', at(9_000));
      const claim = (limit: number) =>
        claimDueItemsAndNext(db, { claimant: 'w', now: clock.now(), limit, busyKeys: ['busy'] });
      const first = await claim(4);
      expect(first.items.map((i) => `${i.kind}/${i.key}`)).toEqual(['r/due']);
      expect(first.nextDueAt).toEqual(at(5_000));
      await db.query('DELETE FROM work_items WHERE key = $1', ['next']);
      await db.query('DELETE FROM work_items WHERE key = $1', ['due']);
      const second = await claim(4);
      expect(second).toEqual({ items: [], nextDueAt: at(9_000) });
      await db.query('DELETE FROM work_items WHERE key <> $1', ['busy']);
      expect((await claim(4)).nextDueAt).toBeUndefined();
    });

    it('clears urgent at the claim; an urgent enqueue while the item runs makes the next pass urgent', async () => {
      const urgentOf = async (key: string) =>
        (await db.query<{ urgent: boolean }>('SELECT urgent FROM work_items WHERE key = $1', [key])).rows[0]?.urgent;
      let calls = 0;
      const reconcile: Reconciler = async (key, ctx) => {
        calls += 1;
        if (key === 'woken' && calls === 1)
          await ctx.sql.transaction((tx) => work.enqueue(tx, { kind: 'r', key, urgent: true }));
        return { requeueAfterMs: 5_000 };
      };
      // A routine enqueue does not clear a pending urgent wake.
      await db.transaction((tx) => work.enqueue(tx, { kind: 'r', key: 'woken', urgent: true }));
      await enqueue('r', 'woken');
      expect(await urgentOf('woken')).toBe(true);
      await run({ r: reconcile });
      expect(await urgentOf('woken')).toBe(true);
      expect((await item('r', 'woken'))?.not_before.getTime()).toBeLessThanOrEqual(clock.now().getTime());
      await run({ r: reconcile });
      expect(calls).toBe(2);
      expect(await urgentOf('woken')).toBe(false);
    });

    it('runDueWork handles due items only, once each, and deletes them when the reconciler returns nothing', async () => {
      const seen: string[] = [];
      const reconcile: Reconciler = async (key) => {
        seen.push(key);
      };
      await enqueue('r', 'due-1');
      await enqueue('r', 'due-2', at(-1_000));
      await enqueue('r', 'later', at(60_000));
      expect(await run({ r: reconcile })).toBe(2);
      expect(seen.sort()).toEqual(['due-1', 'due-2']);
      expect(await item('r', 'due-1')).toBeUndefined();
      expect(await item('r', 'later')).toBeDefined();
      expect(await run({ r: reconcile })).toBe(0);
      clock.advance(60_000);
      expect(await run({ r: reconcile })).toBe(1);
      expect(seen).toContain('later');
      expect((await db.query('SELECT 1 FROM work_items')).rowCount).toBe(0);
    });

    it('runDueWork can be limited to some shards', async () => {
      const keys = Array.from({ length: 12 }, (_, i) => `node_${i}`);
      for (const key of keys) await enqueue('r', key);
      const seen: string[] = [];
      const target = shardOf('node_0', SHARDS);
      await run({ r: async (key) => void seen.push(key) }, { shards: [target] });
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.sort()).toEqual(keys.filter((k) => shardOf(k, SHARDS) === target).sort());
    });

    it('keeps an item due when it is enqueued again while its reconciler runs', async () => {
      let calls = 0;
      const reconcile: Reconciler = async (key) => {
        calls += 1;
        if (calls === 1) await enqueue('r', key);
      };
      await enqueue('r', 'busy');
      expect(await run({ r: reconcile })).toBe(1);
      const kept = await item('r', 'busy');
      expect(kept?.not_before.getTime()).toBeLessThanOrEqual(clock.now().getTime());
      expect(await run({ r: reconcile })).toBe(1);
      expect(calls).toBe(2);
      expect(await item('r', 'busy')).toBeUndefined();
    });

    it('honours a future notBefore enqueued while the reconciler runs, not the stale due time', async () => {
      const reconcile: Reconciler = async (key) => enqueue('r', key, at(30_000));
      await enqueue('r', 'later-again');
      await run({ r: reconcile });
      expect((await item('r', 'later-again'))?.not_before).toEqual(at(30_000));
    });

    it('requeues after requeueAfterMs, and the earliest of a requeue and an enqueue meanwhile wins', async () => {
      await enqueue('r', 'plain');
      await run({ r: async () => ({ requeueAfterMs: 30_000 }) });
      expect(await item('r', 'plain')).toMatchObject({ not_before: at(30_000), attempts: 0 });
      expect(await run({ r: async () => ({ requeueAfterMs: 30_000 }) })).toBe(0);

      await enqueue('r', 'enqueued-sooner');
      await run({
        r: async (key) => {
          await enqueue('r', key, at(10_000));
          return { requeueAfterMs: 60_000 };
        },
      });
      expect((await item('r', 'enqueued-sooner'))?.not_before).toEqual(at(10_000));

      await db.query('TRUNCATE work_items');
      await enqueue('r', 'requeue-sooner');
      await run({
        r: async (key) => {
          await enqueue('r', key, at(90_000));
          return { requeueAfterMs: 5_000 };
        },
      });
      expect((await item('r', 'requeue-sooner'))?.not_before).toEqual(at(5_000));
    });

    it('backs off exponentially on errors up to the cap, keeps the error text, and resets on success', async () => {
      let failures = 5;
      const reconcile: Reconciler = async () => {
        if (failures > 0) {
          failures -= 1;
          throw new ComputeError('TIMEOUT', 'the BMC did not answer');
        }
        return { requeueAfterMs: 1_000 };
      };
      await enqueue('r', 'flaky');
      const delays: number[] = [];
      for (let i = 0; i < 5; i += 1) {
        expect(await run({ r: reconcile }, { backoff: { baseMs: 1_000, maxMs: 4_000 } })).toBe(1);
        const row = await item('r', 'flaky');
        expect(row).toMatchObject({ attempts: i + 1, last_error: 'TIMEOUT: the BMC did not answer' });
        const delay = (row?.not_before.getTime() ?? 0) - clock.now().getTime();
        delays.push(delay);
        clock.advance(delay - 1);
        expect(await run({ r: reconcile })).toBe(0);
        clock.advance(1);
      }
      expect(delays).toEqual([1_000, 2_000, 4_000, 4_000, 4_000]);
      await run({ r: reconcile });
      expect(await item('r', 'flaky')).toMatchObject({ attempts: 0, last_error: null });
    });

    it('uses 1 s doubling as the default backoff', async () => {
      await enqueue('r', 'boom');
      const fail: Reconciler = async () => {
        throw new ComputeError('DRIVER_ERROR', 'ipmi failed');
      };
      await run({ r: fail });
      expect((await item('r', 'boom'))?.not_before).toEqual(at(1_000));
      clock.advance(1_000);
      await run({ r: fail });
      expect((await item('r', 'boom'))?.not_before).toEqual(at(1_000 + 2_000));
    });

    it('stores a generic text, never the message, for an error that is not a ComputeError', async () => {
      await enqueue('r', 'leaky');
      const log = recordingLogger();
      await run(
        {
          r: async () => {
            throw new Error('login failed for password=hunter2');
          },
        },
        { log },
      );
      const row = await item('r', 'leaky');
      expect(row).toMatchObject({ attempts: 1, last_error: 'reconciler failed with an unclassified error' });
      expect(JSON.stringify(log.lines)).not.toContain('hunter2');
      expect(log.lines.some((l) => l.level === 'error')).toBe(true);
    });

    it('keeps an item of a kind without a reconciler, with backoff and an error logged', async () => {
      await enqueue('ghost', 'node_x');
      const log = recordingLogger();
      expect(await run({}, { log })).toBe(1);
      const row = await item('ghost', 'node_x');
      expect(row?.attempts).toBe(1);
      expect(row?.last_error).toContain("no reconciler is registered for work kind 'ghost'");
      expect(row?.not_before).toEqual(at(1_000));
      expect(log.lines).toContainEqual(
        expect.objectContaining({ level: 'error', fields: expect.objectContaining({ kind: 'ghost', key: 'node_x' }) }),
      );
    });

    it('treats a malformed reconciler result as a failure', async () => {
      await enqueue('r', 'odd');
      await run({ r: async () => ({ requeueAfterMs: -5 }) });
      expect(await item('r', 'odd')).toMatchObject({
        attempts: 1,
        last_error: expect.stringContaining('INVALID_STATE'),
      });
    });

    it('reports each item to onItem with its outcome', async () => {
      await enqueue('ok', 'a');
      await enqueue('again', 'b');
      await enqueue('bad', 'c');
      const outcomes: Record<string, string> = {};
      await run(
        {
          ok: async () => undefined,
          again: async () => ({ requeueAfterMs: 5 }),
          bad: async () => {
            throw new ComputeError('CONFLICT', 'no');
          },
        },
        {
          onItem: (r) => {
            outcomes[r.key] = r.outcome;
          },
        },
      );
      expect(outcomes).toEqual({ a: 'done', b: 'requeued', c: 'failed' });
    });

    it('records nothing for a pass that wrote its own requeue (requeueItemSql), and tells it its item', async () => {
      await enqueue('own', 'node_own');
      let seenItem: unknown;
      const own: Reconciler = async (_key, ctx) => {
        seenItem = ctx.item;
        const requeue = requeueItemSql({ kind: '$1', key: '$2', at: '$3', now: '$4' });
        await ctx.sql.query(`WITH rq AS (${requeue} RETURNING 1) SELECT count(*) FROM rq`, [
          ctx.item?.kind,
          ctx.item?.key,
          at(60_000),
          clock.now(),
        ]);
        // Were the worker to record this, the item would be due at once.
        return { requeueAfterMs: 0, requeueWritten: true };
      };
      const reports: string[] = [];
      await run({ own }, { onItem: (report) => reports.push(report.outcome) });
      expect(seenItem).toEqual({ kind: 'own', key: 'node_own', seq: expect.anything() });
      expect(reports).toEqual(['requeued']);
      expect(await item('own', 'node_own')).toMatchObject({ not_before: at(60_000), attempts: 0, claimed_by: null });
    });

    it('an enqueue made while such a pass ran still wins over the requeue it wrote', async () => {
      await enqueue('own', 'node_own');
      const own: Reconciler = async (_key, ctx) => {
        await ctx.work.enqueue(ctx.sql, { kind: 'own', key: 'node_own', notBefore: at(5_000) });
        await ctx.sql.query(requeueItemSql({ kind: '$1', key: '$2', at: '$3', now: '$4' }), [
          'own',
          'node_own',
          at(60_000),
          clock.now(),
        ]);
        return { requeueAfterMs: 60_000, requeueWritten: true };
      };
      await run({ own });
      expect(await item('own', 'node_own')).toMatchObject({ not_before: at(5_000) });
    });

    it('exposes the fencing error shape reconcilers can test for', () => {
      const fenced = new ComputeError('INVALID_STATE', 'x', { details: { reason: 'fenced' } });
      expect(isFencedError(fenced)).toBe(true);
      expect(isFencedError(new ComputeError('INVALID_STATE', 'x'))).toBe(false);
    });
  });
}
