import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMs } from '../../src/clock';
import type { SqlDatabase } from '../../src/sql';
import { FencedExecutor, isFencedError, type ShardLease } from '../../src/work/fenced-executor';
import { acquireLeases } from '../../src/work/leases';
import { migrate, waitFor } from '../fixtures/work-support';
import { type ScratchDatabase, scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

const SHARD = 5;
const T0 = new Date('2026-03-01T00:00:00.000Z');
const LEASE_MS = 1_000;

/** Whether some other backend of this database waits on a lock in the middle of a lease acquisition. */
async function takeoverWaitsOnALock(db: SqlDatabase): Promise<boolean> {
  const { rowCount } = await db.query(
    `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
       AND wait_event_type = 'Lock' AND position('INSERT INTO shard_leases' IN query) > 0`,
  );
  return rowCount > 0;
}

// docs/work-queue.md, "The fencing rule": a takeover updates the lease row, so it waits for every transaction that
// share-locked that row at the old epoch, and the old holder's write commits before the new epoch exists or not at
// all. Two connections interleave by hand: the stale holder passes its fence check and stops before its write; the
// successor takes the shard over; only then may the stale holder go on. Without the lock, the fence check is a mere
// read and the stale write commits after the takeover, unseen by the successor.
describe.runIf(TEST_DATABASE_URL)('a takeover between a fence check and its commit (postgres)', () => {
  let scratch: ScratchDatabase;
  let db: SqlDatabase;

  beforeAll(async () => {
    scratch = await scratchPostgres();
    db = scratch.db;
    await migrate(db);
    await db.query('CREATE TABLE fenced_writes (worker_id text NOT NULL)');
  });
  afterAll(async () => {
    await scratch?.drop();
  });

  it('holds the takeover until the stale transaction ends, so nothing it commits lands after the new epoch', async () => {
    const acquired = await acquireLeases(db, 'wrk_stale', [SHARD], T0, addMs(T0, LEASE_MS));
    const lease: ShardLease = { workerId: 'wrk_stale', shard: SHARD, epoch: acquired.get(SHARD) as number };
    const stale = new FencedExecutor(scratch.connect(), lease);
    const successor = scratch.connect();

    let fencePassed: () => void = () => undefined;
    const passed = new Promise<void>((resolve) => {
      fencePassed = resolve;
    });
    let goOn: () => void = () => undefined;
    const resumed = new Promise<void>((resolve) => {
      goOn = resolve;
    });
    // The executor checks the lease as the transaction begins; the callback runs once that check passed.
    const staleWrite = stale.transaction(async (tx) => {
      fencePassed();
      await resumed;
      await tx.query('INSERT INTO fenced_writes (worker_id) VALUES ($1)', [lease.workerId]);
    });
    await passed;

    // The stale holder's lease ran out by the successor's clock: it takes the shard, then reads what was committed.
    const later = addMs(T0, 5 * LEASE_MS);
    let tookOver = false;
    const takeover = (async () => {
      const epochs = await acquireLeases(successor, 'wrk_successor', [SHARD], later, addMs(later, LEASE_MS));
      const { rows } = await successor.query<{ worker_id: string }>('SELECT worker_id FROM fenced_writes');
      tookOver = true;
      return { epoch: epochs.get(SHARD), seen: rows };
    })();
    // Either the takeover is done already (the fence did not hold it), or it waits on the lease row's lock.
    await waitFor('the takeover to finish or wait on a lock', async () => tookOver || takeoverWaitsOnALock(db));
    goOn();
    await staleWrite;
    const { epoch, seen } = await takeover;

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
});
