import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMs, systemClock } from '../../src/clock';
import type { SqlDatabase, SqlExecutor } from '../../src/sql';
import { FencedExecutor, isFencedError, type ShardLease } from '../../src/work/fenced-executor';
import { finishBatch } from '../../src/work/finish';
import { acquireLeases } from '../../src/work/leases';
import { shardOf } from '../../src/work/shard';
import { createWorkQueue } from '../../src/work/work-queue';
import { migrate, waitFor } from '../fixtures/work-support';
import { type ScratchDatabase, scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

const SHARDS = 64;
const T0 = new Date('2026-03-01T00:00:00.000Z');
const LEASE_MS = 1_000;

/** Whether some other backend of this database waits on a lock in the middle of a statement containing `text`. */
async function waitsOnALock(db: SqlDatabase, text: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
       AND wait_event_type = 'Lock' AND position($1 IN query) > 0`,
    [text],
  );
  return rowCount > 0;
}

/** A promise and the function that resolves it: the test opens a gate by hand. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/**
 * The successor takes `shard` over (the stale holder's lease ran out by its clock), then reads what it finds with
 * `read`. Resolves once the stale holder is let go on: when the takeover is done already (the fence did not hold it)
 * or waits on the lease row's lock (it did), so the test never waits on itself either way.
 */
async function takeOver<T>(db: SqlDatabase, successor: SqlDatabase, shard: number, read: (sql: SqlExecutor) => T) {
  const later = addMs(T0, 5 * LEASE_MS);
  let done = false;
  const result = (async () => {
    const epochs = await acquireLeases(successor, 'wrk_successor', [shard], later, addMs(later, LEASE_MS));
    const seen = await read(successor);
    done = true;
    return { epoch: epochs.get(shard), seen };
  })();
  await waitFor(
    'the takeover to finish or wait on a lock',
    async () => done || waitsOnALock(db, 'INSERT INTO shard_leases'),
  );
  // Wrapped, so awaiting this function does not wait for the takeover itself.
  return { result };
}

// docs/work-queue.md, "The fencing rule": a takeover updates the lease row, so it waits for every transaction or
// statement that share-locked that row at the old epoch, and the old holder's write commits before the new epoch
// exists or not at all. Two connections interleave by hand: the stale holder passes its fence check and is held before
// its write commits; the successor takes the shard over; only then may the stale holder go on. Without the lock, the
// fence check is a mere read, and the stale write commits after the takeover, unseen by the successor.
describe.runIf(TEST_DATABASE_URL)('a takeover between a fence check and its commit (postgres)', () => {
  let scratch: ScratchDatabase;
  let db: SqlDatabase;
  let successor: SqlDatabase;

  beforeAll(async () => {
    scratch = await scratchPostgres();
    db = scratch.db;
    successor = scratch.connect();
    await migrate(db);
    await db.query('CREATE TABLE fenced_writes (worker_id text NOT NULL)');
  });
  afterAll(async () => {
    await scratch?.drop();
  });

  async function staleLease(shard: number): Promise<ShardLease> {
    const acquired = await acquireLeases(db, 'wrk_stale', [shard], T0, addMs(T0, LEASE_MS));
    return { workerId: 'wrk_stale', shard, epoch: acquired.get(shard) as number };
  }

  it("waits for a fenced transaction, so nothing it commits lands after the new epoch (the reconciler's sql)", async () => {
    const lease = await staleLease(5);
    const stale = new FencedExecutor(scratch.connect(), lease);
    const fencePassed = gate();
    const goOn = gate();
    // The executor checks the lease as the transaction begins; the callback runs once that check passed.
    const staleWrite = stale.transaction(async (tx) => {
      fencePassed.open();
      await goOn.opened;
      await tx.query('INSERT INTO fenced_writes (worker_id) VALUES ($1)', [lease.workerId]);
    });
    await fencePassed.opened;
    const takeover = await takeOver(db, successor, lease.shard, async (sql) => {
      return (await sql.query<{ worker_id: string }>('SELECT worker_id FROM fenced_writes')).rows;
    });
    goOn.open();
    await staleWrite;
    const { epoch, seen } = await takeover.result;

    expect(epoch).toBe(lease.epoch + 1);
    const { rows: committed } = await db.query<{ worker_id: string }>('SELECT worker_id FROM fenced_writes');
    expect(committed).toEqual([{ worker_id: 'wrk_stale' }]);
    // Everything the stale holder committed was there when the successor took over.
    expect(seen).toEqual(committed);
    // From the new epoch on, the stale holder commits nothing.
    const refused = await stale
      .transaction(async () => undefined)
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(isFencedError(refused)).toBe(true);
  });

  it("waits for a worker's one-statement record of finished items, so a stale delete lands before the new epoch", async () => {
    const work = createWorkQueue({ clock: systemClock, shards: SHARDS });
    const key = 'node_fence_race';
    await db.transaction((tx) => work.enqueue(tx, { kind: 'tick', key }));
    const lease = await staleLease(shardOf(key, SHARDS));
    const { rows } = await db.query<{ seq: number }>('SELECT seq FROM work_items WHERE key = $1', [key]);
    const item = { kind: 'tick', key, shard: lease.shard, seq: Number(rows[0]?.seq), attempts: 0, notBefore: T0 };
    // A transaction holds the item's row, so the record statement, once it has share-locked the lease row, waits
    // before it can delete the item: its fence check is done and its commit is not.
    const holdItem = gate();
    const holding = gate();
    const holder = scratch.connect().transaction(async (tx) => {
      await tx.query('SELECT 1 FROM work_items WHERE key = $1 FOR UPDATE', [key]);
      holding.open();
      await holdItem.opened;
    });
    await holding.opened;
    const record = finishBatch(scratch.connect(), [{ item: { ...item, urgent: false }, lease }], T0);
    await waitFor('the record to wait on the item', () => waitsOnALock(db, 'WITH lease AS'));
    const takeover = await takeOver(db, successor, lease.shard, async (sql) => {
      return (await sql.query<{ key: string }>('SELECT key FROM work_items WHERE key = $1', [key])).rows;
    });
    holdItem.open();
    await holder;
    const outcomes = await record;
    const { epoch, seen } = await takeover.result;

    expect(epoch).toBe(lease.epoch + 1);
    expect(outcomes).toEqual(['deleted']);
    // The successor took over after the stale delete committed: it never saw an item that was already gone.
    const { rows: left } = await db.query<{ key: string }>('SELECT key FROM work_items WHERE key = $1', [key]);
    expect(seen).toEqual(left);
  });
});
