import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock';
import type { SqlDatabase } from '../../src/sql';
import { createWorkQueue, shardOf } from '../../src/work';
import { spawnWorker, stopWorker, type WorkerProcess } from '../fixtures/work-processes';
import { migrate, waitFor } from '../fixtures/work-support';
import { type ScratchDatabase, scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

const SHARDS = 4;
const KEY = 'node_paused';
const ENV = { SHARDS: String(SHARDS), LEASE_MS: '1500', HEARTBEAT_MS: '150', POLL_MS: '100' };

describe.runIf(TEST_DATABASE_URL)('fencing across processes (postgres)', () => {
  let scratch: ScratchDatabase;
  let db: SqlDatabase;
  const workers: WorkerProcess[] = [];

  beforeAll(async () => {
    scratch = await scratchPostgres();
    db = scratch.db;
    await migrate(db);
    await db.query('CREATE TABLE slow_started (key text, worker_id text, PRIMARY KEY (key, worker_id))');
    await db.query('CREATE TABLE slow_results (key text NOT NULL, worker_id text NOT NULL)');
    await db.query('CREATE TABLE slow_outcomes (key text NOT NULL, worker_id text NOT NULL, outcome text NOT NULL)');
  });
  afterAll(async () => {
    for (const w of workers) w.child.kill('SIGCONT');
    await Promise.all(workers.map((w) => stopWorker(w)));
    await scratch?.drop();
  });

  it('a paused worker whose lease was taken over cannot commit when it resumes', async () => {
    const url = scratch.url ?? '';
    const paused = await spawnWorker('w-paused', { ...ENV, DATABASE_URL: url, SLOW_MS: '2500' });
    workers.push(paused);
    const work = createWorkQueue({ clock: systemClock, shards: SHARDS });
    await db.transaction((tx) => work.enqueue(tx, { kind: 'slow', key: KEY }));
    await waitFor('the first worker to start the item', async () => {
      const { rowCount } = await db.query('SELECT 1 FROM slow_started WHERE worker_id = $1', [paused.id]);
      return rowCount > 0;
    });
    const shard = shardOf(KEY, SHARDS);
    const before = await db.query<{ epoch: number }>('SELECT epoch FROM shard_leases WHERE shard = $1', [shard]);

    // Frozen mid-item, as a long GC pause or a stalled VM would be: no heartbeats, the lease runs out.
    paused.child.kill('SIGSTOP');
    const successor = await spawnWorker('w-successor', { ...ENV, DATABASE_URL: url, SLOW_MS: '50' });
    workers.push(successor);
    await waitFor(
      "the successor to take the shard and commit the item's result",
      async () => {
        const { rowCount } = await db.query('SELECT 1 FROM slow_results WHERE worker_id = $1', [successor.id]);
        return rowCount > 0;
      },
      15_000,
    );
    const after = await db.query<{ worker_id: string; epoch: number }>(
      'SELECT worker_id, epoch FROM shard_leases WHERE shard = $1',
      [shard],
    );
    expect(after.rows[0]?.worker_id).toBe(successor.id);
    expect(after.rows[0]?.epoch).toBeGreaterThan(before.rows[0]?.epoch ?? Infinity);

    paused.child.kill('SIGCONT');
    const outcome = await waitFor('the resumed worker to try to commit', async () => {
      const { rows } = await db.query<{ outcome: string }>('SELECT outcome FROM slow_outcomes WHERE worker_id = $1', [
        paused.id,
      ]);
      return rows[0]?.outcome;
    });
    expect(outcome).toBe('fenced');
    const results = await db.query<{ worker_id: string }>('SELECT worker_id FROM slow_results WHERE key = $1', [KEY]);
    expect(results.rows).toEqual([{ worker_id: successor.id }]);
    // The successor's completion deleted the item; the fenced worker's could not resurrect or fail it.
    expect((await db.query('SELECT 1 FROM work_items')).rowCount).toBe(0);

    expect(await stopWorker(paused)).toBe(0);
    expect(await stopWorker(successor)).toBe(0);
  });
});
