import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock';
import type { SqlDatabase } from '../../src/sql';
import { createWorkQueue, shardOf, startWorker, type WorkerHandle } from '../../src/work';
import { contextFactory, migrate, waitFor } from '../fixtures/work-support';
import { type ScratchDatabase, scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

const SHARDS = 16;

describe.runIf(TEST_DATABASE_URL)('rebalancing (postgres)', () => {
  let scratch: ScratchDatabase;
  let db: SqlDatabase;
  const running: WorkerHandle[] = [];
  const work = createWorkQueue({ clock: systemClock, shards: SHARDS });
  let handled = 0;
  let openGate: () => void = () => undefined;
  let gateStarted = false;
  // Two workers in one process, each with its own pool, as a benchmark or a server with several workers runs them.
  const QUICK = { leaseMs: 1_500, heartbeatMs: 100 };
  // Heartbeats too far apart to happen during a test: only the rebalance announcements move shards.
  const SLOW = { leaseMs: 600_000, heartbeatMs: 300_000 };
  const start = (workerId: string, timing = QUICK) =>
    startWorker({
      db: scratch.connect(),
      clock: systemClock,
      shards: SHARDS,
      reconcilers: new Map([
        [
          'tick',
          async () => {
            handled += 1;
          },
        ],
        [
          'gated',
          async () => {
            gateStarted = true;
            await new Promise<void>((resolve) => {
              openGate = resolve;
            });
          },
        ],
      ]),
      makeContext: contextFactory(work),
      workerId,
      ...timing,
      pollMs: 50,
    }).then((w) => {
      running.push(w);
      return w;
    });
  const owners = async () => {
    const { rows } = await db.query<{ worker_id: string | null; n: number }>(
      'SELECT worker_id, count(*)::int AS n FROM shard_leases GROUP BY worker_id ORDER BY worker_id',
    );
    return Object.fromEntries(rows.map((r) => [r.worker_id ?? 'free', r.n]));
  };

  beforeAll(async () => {
    scratch = await scratchPostgres();
    db = scratch.db;
    await migrate(db);
  });
  beforeEach(async () => {
    await Promise.all(running.splice(0).map((w) => w.stop()));
    await db.query('TRUNCATE work_items, shard_leases, workers');
  });
  afterAll(async () => {
    await Promise.all(running.map((w) => w.stop()));
    await scratch?.drop();
  });

  it('splits the shards when a second worker joins and takes them back when it stops', async () => {
    const a = await start('wrk_a');
    expect(await owners()).toEqual({ wrk_a: SHARDS });

    const b = await start('wrk_b');
    await waitFor('the shards to be split evenly', async () => {
      const now = await owners();
      return now.wrk_a === SHARDS / 2 && now.wrk_b === SHARDS / 2;
    });
    // Live workers sorted by id, shard s to worker s mod n: a has the even shards, b the odd ones.
    await waitFor(
      'each worker to see its own leases',
      () => a.stats().shards.length === 8 && b.stats().shards.length === 8,
    );
    expect(a.stats().shards).toEqual([0, 2, 4, 6, 8, 10, 12, 14]);
    expect(b.stats().shards).toEqual([1, 3, 5, 7, 9, 11, 13, 15]);

    // Both process their halves.
    await db.transaction(async (tx) => {
      for (let i = 0; i < 200; i += 1) await work.enqueue(tx, { kind: 'tick', key: `node_${i}` });
    });
    await waitFor('all items handled', () => handled >= 200);
    // A worker counts an item as processed once its completion is recorded, a moment after the reconciler returned.
    await waitFor('all items recorded', () => a.stats().processed + b.stats().processed >= 200);
    expect(a.stats().processed).toBeGreaterThan(0);
    expect(b.stats().processed).toBeGreaterThan(0);
    expect(a.stats().processed + b.stats().processed).toBe(handled);

    await b.stop();
    await waitFor('the remaining worker to hold every shard', async () => (await owners()).wrk_a === SHARDS);
  });

  it('hands over a shard with an item in flight only after the item finishes', async () => {
    // A key on an odd shard: wrk_b's once it joins.
    const key = Array.from({ length: 100 }, (_, i) => `node_g${i}`).find((k) => shardOf(k, SHARDS) % 2 === 1) ?? '';
    const shard = shardOf(key, SHARDS);
    const a = await start('wrk_a');
    await db.transaction((tx) => work.enqueue(tx, { kind: 'gated', key }));
    await waitFor('the gated item to start on wrk_a', () => gateStarted);
    const b = await start('wrk_b');
    await waitFor('wrk_b to hold its other shards', () => b.stats().shards.length === SHARDS / 2 - 1);
    expect(b.stats().shards).not.toContain(shard);
    expect(a.stats().shards).toContain(shard);
    openGate();
    await waitFor('wrk_b to take the shard once the item finished', () => b.stats().shards.includes(shard));
    expect(a.stats().byOutcome).toMatchObject({ done: 1, fenced: 0 });
    expect((await db.query('SELECT 1 FROM work_items')).rowCount).toBe(0);
  });

  it('moves shards at once when a worker joins, drains a shard or stops, without waiting for a heartbeat', async () => {
    const key = Array.from({ length: 100 }, (_, i) => `node_s${i}`).find((k) => shardOf(k, SHARDS) % 2 === 1) ?? '';
    const shard = shardOf(key, SHARDS);
    const a = await start('wrk_a', SLOW);
    await db.transaction((tx) => work.enqueue(tx, { kind: 'gated', key }));
    await waitFor('the gated item to start on wrk_a', () => gateStarted);

    const b = await start('wrk_b', SLOW);
    await waitFor('wrk_a to give up its idle odd shards', async () => (await owners()).wrk_b === SHARDS / 2 - 1);
    await waitFor('wrk_b to see them', () => b.stats().shards.length === SHARDS / 2 - 1);
    expect(a.stats().shards).toContain(shard);

    openGate();
    await waitFor('wrk_b to take the drained shard', () => b.stats().shards.includes(shard));
    expect(a.stats().shards).toEqual([0, 2, 4, 6, 8, 10, 12, 14]);

    await b.stop();
    await waitFor('wrk_a to take every shard back', () => a.stats().shards.length === SHARDS);
    expect(await owners()).toEqual({ wrk_a: SHARDS });
  });
});
