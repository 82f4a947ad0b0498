import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock';
import type { SqlDatabase } from '../../src/sql';
import { createWorkQueue, shardOf } from '../../src/work';
import { spawnWorker, stopWorker, type WorkerProcess } from '../fixtures/work-processes';
import { migrate, waitFor } from '../fixtures/work-support';
import { type ScratchDatabase, scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

const SHARDS = 64;
const KEYS = Array.from({ length: 3_000 }, (_, i) => `node_${String(i).padStart(4, '0')}`);
const WORKER_ENV = { SHARDS: String(SHARDS), LEASE_MS: '2000', HEARTBEAT_MS: '200', POLL_MS: '200', CONCURRENCY: '8' };

describe.runIf(TEST_DATABASE_URL)('workers in separate processes (postgres)', () => {
  let scratch: ScratchDatabase;
  let db: SqlDatabase;
  const workers: WorkerProcess[] = [];
  const work = createWorkQueue({ clock: systemClock, shards: SHARDS });

  // Bumps each key's version and enqueues it in the same transaction, as a real change would.
  async function touch(keys: readonly string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 500) {
      const batch = keys.slice(i, i + 500);
      await db.transaction(async (tx) => {
        await tx.query(
          `INSERT INTO probe_versions (key, version) SELECT k, 1 FROM unnest($1::text[]) AS k
           ON CONFLICT (key) DO UPDATE SET version = probe_versions.version + 1`,
          [batch],
        );
        // Pipelined on the transaction's connection: one statement per enqueue, without a round trip each.
        await Promise.all(batch.map((key) => work.enqueue(tx, { kind: 'probe', key })));
      });
    }
  }
  const count = async (sql: string, params: unknown[] = []) =>
    (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM (${sql}) q`, params)).rows[0]?.n ?? 0;
  const behind = () =>
    count(
      `SELECT v.key FROM probe_versions v LEFT JOIN probe_handled h ON h.key = v.key
       WHERE h.version IS NULL OR h.version < v.version`,
    );
  const leasesOf = async (workerId: string) =>
    (
      await db.query<{ shard: number; epoch: number }>(
        'SELECT shard, epoch FROM shard_leases WHERE worker_id = $1 ORDER BY shard',
        [workerId],
      )
    ).rows;

  beforeAll(async () => {
    scratch = await scratchPostgres();
    db = scratch.db;
    await migrate(db);
    // A scratch database: commits need not wait for the disk, which keeps thousands of small transactions quick.
    await db.query(`ALTER DATABASE ${new URL(scratch.url ?? '').pathname.slice(1)} SET synchronous_commit = off`);
    await db.query('CREATE TABLE probe_versions (key text PRIMARY KEY, version int NOT NULL)');
    await db.query('CREATE TABLE probe_active (key text PRIMARY KEY, worker_id text NOT NULL)');
    await db.query('CREATE TABLE probe_overlaps (key text NOT NULL, worker_id text NOT NULL)');
    await db.query(
      'CREATE TABLE probe_handled (key text PRIMARY KEY, version int NOT NULL, worker_id text NOT NULL, runs int NOT NULL)',
    );
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => stopWorker(w)));
    await scratch?.drop();
  });

  it('three workers share thousands of keys without overlap or loss, and survive one being killed', async () => {
    await touch(KEYS);
    const env = { ...WORKER_ENV, DATABASE_URL: scratch.url ?? '' };
    workers.push(...(await Promise.all(['w1', 'w2', 'w3'].map((id) => spawnWorker(id, env)))));
    const [w1, w2, victim] = workers as [WorkerProcess, WorkerProcess, WorkerProcess];

    // Enqueue again while the first round is being processed: those keys must be handled at their new version.
    await touch(KEYS.filter((_, i) => i % 6 === 0));

    // Shards end up split over all three before the kill, so the victim owns some.
    await waitFor('the shards to be split over three workers', async () => {
      const owners = await count('SELECT DISTINCT worker_id FROM shard_leases WHERE worker_id IS NOT NULL');
      return owners === 3 && (await count('SELECT 1 FROM shard_leases WHERE worker_id IS NOT NULL')) === SHARDS;
    });
    const victimLeases = await leasesOf(victim.id);
    expect(victimLeases.length).toBeGreaterThan(0);

    victim.child.kill('SIGKILL');
    expect(await victim.exited).toBe('SIGKILL');
    // A killed worker cannot clear its probe marks; they are bookkeeping, not work, so the test clears them.
    await db.query('DELETE FROM probe_active WHERE worker_id = $1', [victim.id]);

    // The victim's keys (and some others) change again after the kill, so its shards have work only a survivor can do.
    const victimShards = new Set(victimLeases.map((l) => l.shard));
    await touch(KEYS.filter((k, i) => victimShards.has(shardOf(k, SHARDS)) || i % 5 === 0));

    await waitFor('every key handled at its latest version', async () => (await behind()) === 0, 25_000, 200);

    const now = await db.query<{ shard: number; worker_id: string | null; epoch: number }>(
      'SELECT shard, worker_id, epoch FROM shard_leases WHERE shard = ANY($1::int[])',
      [[...victimShards]],
    );
    for (const lease of now.rows) {
      expect([w1.id, w2.id]).toContain(lease.worker_id);
      expect(lease.epoch).toBeGreaterThan(victimLeases.find((l) => l.shard === lease.shard)?.epoch ?? Infinity);
    }
    const victimKeys = KEYS.filter((k) => victimShards.has(shardOf(k, SHARDS)));
    const handledBy = await db.query<{ worker_id: string; version: number }>(
      'SELECT worker_id, version FROM probe_handled WHERE key = ANY($1::text[])',
      [victimKeys],
    );
    expect(handledBy.rows).toHaveLength(victimKeys.length);
    expect(handledBy.rows.every((r) => r.worker_id !== victim.id)).toBe(true);

    expect((await db.query('SELECT key, worker_id FROM probe_overlaps')).rows).toEqual([]);
    expect(await count('SELECT 1 FROM work_items')).toBe(0);

    expect(await stopWorker(w1)).toBe(0);
    expect(await stopWorker(w2)).toBe(0);
    expect(await count('SELECT 1 FROM shard_leases WHERE worker_id IS NOT NULL')).toBe(0);
  });
});
