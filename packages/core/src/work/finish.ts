import { addMs } from '../clock';
import type { SqlExecutor } from '../sql/executor';
import { fencedError, type ShardLease } from './fenced-executor';
import type { ClaimedItem } from './items';

/** How a reconciler's pass over an item is recorded. */
export type Finish =
  | { outcome: 'done' }
  | { outcome: 'requeued'; delayMs: number }
  | { outcome: 'failed'; delayMs: number; error: string };

const RELEASE_CLAIM = 'claimed_by = NULL, claimed_at = NULL, enqueued_not_before = NULL';

// One statement per change, each carrying its own lease check: a CTE share-locks the lease row (so a takeover waits
// for the statement) and the change applies only if the row is there. One round trip instead of a four-statement
// transaction, and the check and the change cannot be separated by a takeover.
async function guarded(
  db: SqlExecutor,
  lease: ShardLease | undefined,
  change: string,
  params: readonly unknown[],
): Promise<number> {
  const n = params.length;
  const leaseQuery = lease
    ? `SELECT 1 FROM shard_leases WHERE shard = $${n + 1} AND worker_id = $${n + 2} AND epoch = $${n + 3} FOR SHARE`
    : 'SELECT 1';
  const { rows } = await db.query<{ held: number; changed: number }>(
    `WITH lease AS (${leaseQuery}), changed AS (${change} AND EXISTS (SELECT 1 FROM lease) RETURNING 1)
     SELECT (SELECT count(*) FROM lease)::int AS held, (SELECT count(*) FROM changed)::int AS changed`,
    lease ? [...params, lease.shard, lease.workerId, lease.epoch] : params,
  );
  if (lease && rows[0]?.held !== 1) throw fencedError(lease);
  return rows[0]?.changed ?? 0;
}

/**
 * Records how an item's pass ended, fenced by `lease` when given (a worker) and unfenced without (runDueWork):
 * - `done`: deleted if no enqueue arrived since the claim (same `seq`), else kept due at the earliest time those
 *   enqueues asked for;
 * - `requeued`: due after `delayMs`, or earlier if an enqueue since the claim asked for earlier;
 * - `failed`: one more attempt and the error text kept, due after `delayMs` (the backoff) or earlier if an enqueue
 *   since the claim asked for earlier.
 * Attempts reset on `done` and `requeued`. Throws the fencing error if the lease is no longer held; nothing changes
 * then.
 *
 * @example
 * ```ts
 * await finishItem(db, item, { outcome: 'requeued', delayMs: 30_000 }, clock.now(), lease);
 * ```
 */
export async function finishItem(
  db: SqlExecutor,
  item: ClaimedItem,
  finish: Finish,
  now: Date,
  lease?: ShardLease,
): Promise<void> {
  const key = [item.kind, item.key];
  if (finish.outcome === 'done') {
    const deleted = await guarded(db, lease, 'DELETE FROM work_items WHERE kind = $1 AND key = $2 AND seq = $3', [
      ...key,
      item.seq,
    ]);
    if (deleted > 0) return;
    // A second statement, with a fresh snapshot: it sees an enqueue that committed while the DELETE waited for it.
    await guarded(
      db,
      lease,
      `UPDATE work_items SET not_before = COALESCE(enqueued_not_before, not_before), attempts = 0, last_error = NULL,
         ${RELEASE_CLAIM}, updated_at = $3
       WHERE kind = $1 AND key = $2`,
      [...key, now],
    );
    return;
  }
  const attempts = finish.outcome === 'failed' ? item.attempts + 1 : 0;
  const error = finish.outcome === 'failed' ? finish.error : null;
  await guarded(
    db,
    lease,
    `UPDATE work_items SET not_before = LEAST($3::timestamptz, enqueued_not_before), attempts = $4, last_error = $5,
       ${RELEASE_CLAIM}, updated_at = $6
     WHERE kind = $1 AND key = $2`,
    [...key, addMs(now, finish.delayMs), attempts, error, now],
  );
}
