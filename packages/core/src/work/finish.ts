import { addMs } from '../clock';
import type { SqlExecutor } from '../sql/executor';
import { fencedError, isFencedError, type ShardLease } from './fenced-executor';
import type { ClaimedItem } from './items';
import type { CheckedPark } from './park';

/** How a reconciler's pass over an item is recorded. */
export type Finish =
  | { outcome: 'done' }
  | { outcome: 'requeued'; delayMs: number; park?: CheckedPark }
  | { outcome: 'failed'; delayMs: number; error: string };

const RELEASE_CLAIM = 'claimed_by = NULL, claimed_at = NULL, enqueued_not_before = NULL';

const UNPARKED = 'park_on = NULL, park_every_ms = NULL, park_until = NULL';

// The park columns of a requeue (SQL expressions): parked only if no enqueue arrived while the pass ran (the seq it was
// claimed at is still the item's), since that enqueue is work the wait must not hide.
const parkSets = (item: string, claimedSeq: string, on: string, every: string, until: string) =>
  `park_on = CASE WHEN ${item}.seq = ${claimedSeq} THEN ${on}::jsonb END, park_every_ms = ${every}::int,
   park_until = ${until}::timestamptz`;

// A requeue as every path writes it (a worker's batch, a reconciler's own statement): due at `at` or at an earlier
// enqueue made while the pass ran, attempts reset, the claim released, parked as `park` says (not at all by default).
// `item` is the work_items alias.
const requeueSets = (item: string, at: string, now: string, park: string = UNPARKED) =>
  `not_before = LEAST(${at}, ${item}.enqueued_not_before), attempts = 0, last_error = NULL, ${RELEASE_CLAIM},
   ${park}, updated_at = ${now}`;

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
    await keepForLaterEnqueue(db, item, now, lease);
    return;
  }
  const attempts = finish.outcome === 'failed' ? item.attempts + 1 : 0;
  const error = finish.outcome === 'failed' ? finish.error : null;
  const park = finish.outcome === 'requeued' ? finish.park : undefined;
  await guarded(
    db,
    lease,
    `UPDATE work_items SET not_before = LEAST($3::timestamptz, enqueued_not_before), attempts = $4, last_error = $5,
       ${RELEASE_CLAIM}, ${parkSets('work_items', '$7::int8', '$8', '$9', '$10')}, updated_at = $6
     WHERE kind = $1 AND key = $2`,
    [
      ...key,
      addMs(now, finish.delayMs),
      attempts,
      error,
      now,
      item.seq,
      park?.on ?? null,
      park?.everyMs ?? null,
      park?.until ?? null,
    ],
  );
}

// A done item whose seq changed since its claim stays, due at the earliest time the enqueues since then asked for. A
// statement of its own, with a fresh snapshot: it sees an enqueue that committed while the DELETE waited for it.
async function keepForLaterEnqueue(db: SqlExecutor, item: ClaimedItem, now: Date, lease?: ShardLease): Promise<void> {
  await guarded(
    db,
    lease,
    `UPDATE work_items SET not_before = COALESCE(enqueued_not_before, not_before), attempts = 0, last_error = NULL,
       ${RELEASE_CLAIM}, ${UNPARKED}, updated_at = $3
     WHERE kind = $1 AND key = $2`,
    [item.kind, item.key, now],
  );
}

/** A finished item of a worker, with the lease it was claimed under; `requeueAt` when it asked to run again. */
export interface LeasedItem {
  item: ClaimedItem;
  lease: ShardLease;
  /** Absent: done (deleted unless enqueued again since its claim). Present: due again then, or at an earlier enqueue. */
  requeueAt?: Date;
  /** With `requeueAt`: parked until then (see `WorkPark`). */
  park?: CheckedPark;
}

/** How finishing one item of a batch ended: deleted, kept for an enqueue since its claim, requeued, or fenced. */
export type BatchOutcome = 'deleted' | 'kept' | 'requeued' | 'fenced';

/**
 * Records the `done` and `requeued` passes of one worker's items at once, as {@link finishItem} does for each: one
 * statement share-locks every lease row involved (in shard order, so batches cannot deadlock a takeover), deletes the
 * done items whose `seq` is unchanged and reschedules the requeued ones, each only if its shard is still held at its
 * epoch; each done item whose `seq` changed is then kept by a statement of its own. The fencing rule holds per item:
 * a takeover of any of those shards waits for the statement, and an item whose lease is gone is left untouched and
 * answered `fenced`. Returns one outcome per item, in order.
 *
 * @example
 * ```ts
 * const outcomes = await finishBatch(db, [{ item, lease }, { item: other, lease, requeueAt: addMs(now, 10_000) }], now);
 * ```
 */
export async function finishBatch(db: SqlExecutor, batch: readonly LeasedItem[], now: Date): Promise<BatchOutcome[]> {
  if (batch.length === 0) return [];
  const leases = new Map<string, ShardLease>();
  for (const { lease } of batch) leases.set(`${lease.workerId}|${lease.shard}|${lease.epoch}`, lease);
  const held = [...leases.values()].sort((a, b) => a.shard - b.shard || a.epoch - b.epoch);
  const { rows } = await db.query<{ what: string; kind: string; key: string }>(
    `WITH lease AS (
       SELECT l.shard, l.worker_id, l.epoch FROM shard_leases l
       JOIN unnest($5::int[], $6::text[], $7::int8[]) AS h(shard, worker_id, epoch)
         ON l.shard = h.shard AND l.worker_id = h.worker_id AND l.epoch = h.epoch
       ORDER BY l.shard FOR SHARE OF l
     ), finished AS (
       SELECT c.* FROM unnest($1::text[], $2::text[], $3::int8[], $4::int[], $8::text[], $9::int8[], $10::timestamptz[],
         $12::text[], $13::int[], $14::timestamptz[])
         AS c(kind, key, seq, shard, worker_id, epoch, requeue_at, park_on, park_every_ms, park_until)
       WHERE EXISTS (SELECT 1 FROM lease WHERE lease.shard = c.shard AND lease.worker_id = c.worker_id
                     AND lease.epoch = c.epoch)
     ), deleted AS (
       DELETE FROM work_items w USING finished c
       WHERE c.requeue_at IS NULL AND w.kind = c.kind AND w.key = c.key AND w.seq = c.seq
       RETURNING w.kind, w.key
     ), requeued AS (
       UPDATE work_items w SET ${requeueSets('w', 'c.requeue_at', '$11', parkSets('w', 'c.seq', 'c.park_on', 'c.park_every_ms', 'c.park_until'))}
       FROM finished c
       WHERE c.requeue_at IS NOT NULL AND w.kind = c.kind AND w.key = c.key
       RETURNING w.kind, w.key
     )
     SELECT 'held' AS what, shard::text AS kind, epoch::text AS key FROM lease
     UNION ALL SELECT 'deleted', kind, key FROM deleted
     UNION ALL SELECT 'requeued', kind, key FROM requeued`,
    [
      batch.map((b) => b.item.kind),
      batch.map((b) => b.item.key),
      batch.map((b) => b.item.seq),
      batch.map((b) => b.item.shard),
      held.map((l) => l.shard),
      held.map((l) => l.workerId),
      held.map((l) => l.epoch),
      batch.map((b) => b.lease.workerId),
      batch.map((b) => b.lease.epoch),
      batch.map((b) => b.requeueAt?.toISOString() ?? null),
      now,
      batch.map((b) => b.park?.on ?? null),
      batch.map((b) => b.park?.everyMs ?? null),
      batch.map((b) => b.park?.until?.toISOString() ?? null),
    ],
  );
  const heldShards = new Set(rows.filter((r) => r.what === 'held').map((r) => `${r.kind}|${r.key}`));
  const changed = (what: string) =>
    new Set(rows.filter((r) => r.what === what).map((r) => JSON.stringify([r.kind, r.key])));
  const deleted = changed('deleted');
  const requeued = changed('requeued');
  return Promise.all(
    batch.map(async ({ item, lease, requeueAt }): Promise<BatchOutcome> => {
      const id = JSON.stringify([item.kind, item.key]);
      if (!heldShards.has(`${lease.shard}|${lease.epoch}`)) return 'fenced';
      if (requeueAt) return requeued.has(id) ? 'requeued' : 'fenced';
      if (deleted.has(id)) return 'deleted';
      try {
        await keepForLaterEnqueue(db, item, now, lease);
        return 'kept';
      } catch (err) {
        if (isFencedError(err)) return 'fenced';
        throw err;
      }
    }),
  );
}

/**
 * The statement that requeues a work item (what a worker records for `{ requeueAfterMs }`), for a reconciler to run
 * as a CTE of its own last statement, so the pass ends without a statement of the worker's: due at `at` or at an
 * earlier enqueue made while the pass ran, attempts reset, the claim released. Every argument is an SQL expression
 * (placeholders, typically); `condition` gates it (the reconciler's own write succeeding, say). The statement must be
 * fenced by the lease the item was claimed under (`leaseFenceSql`), as the worker's own record would be; then return
 * `{ requeueAfterMs, requeueWritten: true }`. Use it only for the item `ctx.item` names.
 *
 * @example
 * ```ts
 * const requeue = requeueItemSql({ kind: '$5', key: '$6', at: '$7', now: '$2', condition: 'EXISTS (SELECT 1 FROM wf)' });
 * await ctx.sql.query(`WITH fence AS (…), wf AS (UPDATE …), rq AS (${requeue}) SELECT …`, params);
 * ```
 */
export function requeueItemSql(p: { kind: string; key: string; at: string; now: string; condition?: string }): string {
  return `UPDATE work_items w SET ${requeueSets('w', `${p.at}::timestamptz`, p.now)}
    WHERE w.kind = ${p.kind} AND w.key = ${p.key} AND ${p.condition ?? 'TRUE'}`;
}
