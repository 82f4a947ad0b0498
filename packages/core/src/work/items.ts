import { addMs } from '../clock';
import type { SqlExecutor } from '../sql/executor';

/** A work item as claimed: what finishing it needs to know. */
export interface ClaimedItem {
  kind: string;
  key: string;
  shard: number;
  /** `seq` at claim time; a different value when finishing means an enqueue arrived meanwhile. */
  seq: number;
  attempts: number;
  notBefore: Date;
}

/** Which due items to claim. */
export interface ClaimFilter {
  /** Recorded in `claimed_by`, for operators. */
  claimant: string;
  now: Date;
  limit: number;
  /** Only these shards; every shard when omitted. */
  shards?: readonly number[];
  /** Keys already in flight here: never a second item with the same key at once. */
  busyKeys?: readonly string[];
  /** Only shards whose lease this worker holds (checked in the same statement). */
  leaseHolder?: string;
  /** At most one item per key (for concurrent processing). Default true. */
  distinctKeys?: boolean;
}

interface ItemRow {
  kind: string;
  key: string;
  shard: number;
  seq: number;
  attempts: number;
  not_before: Date;
}

/**
 * Claims due items, due first, skipping rows another transaction holds (`FOR UPDATE SKIP LOCKED`), at most one per
 * key. A claim does not exclude anyone: only the shard's owner claims, and it may take over an item claimed by a dead
 * or fenced worker at once. It resets `enqueued_not_before`, so finishing sees only enqueues made after the claim.
 *
 * @example
 * ```ts
 * const items = await claimDueItems(db, { claimant: workerId, now: clock.now(), limit: 8, shards: [0, 5] });
 * ```
 */
export async function claimDueItems(db: SqlExecutor, filter: ClaimFilter): Promise<ClaimedItem[]> {
  return db.transaction(async (tx) => {
    const params: unknown[] = [filter.now, [...(filter.busyKeys ?? [])], filter.limit * 2];
    let where = 'w.not_before <= $1 AND NOT (w.key = ANY($2::text[]))';
    if (filter.shards) {
      params.push([...filter.shards]);
      where += ` AND w.shard = ANY($${params.length}::int[])`;
    }
    if (filter.leaseHolder !== undefined) {
      params.push(filter.leaseHolder);
      where += ` AND EXISTS (SELECT 1 FROM shard_leases l WHERE l.shard = w.shard AND l.worker_id = $${params.length})`;
    }
    // Twice the limit, so items whose key repeats (another kind of the same node) leave room for others.
    const candidates = await tx.query<{ kind: string; key: string }>(
      `SELECT w.kind, w.key FROM work_items w WHERE ${where} ORDER BY w.not_before, w.kind, w.key LIMIT $3 FOR UPDATE OF w SKIP LOCKED`,
      params,
    );
    const keys = new Set<string>();
    const distinct = filter.distinctKeys ?? true;
    const chosen = candidates.rows
      .filter((row) => !distinct || (!keys.has(row.key) && keys.add(row.key)))
      .slice(0, filter.limit);
    if (chosen.length === 0) return [];
    const { rows } = await tx.query<ItemRow>(
      `UPDATE work_items w SET claimed_by = $1, claimed_at = $2, enqueued_not_before = NULL
       FROM unnest($3::text[], $4::text[]) AS c(kind, key)
       WHERE w.kind = c.kind AND w.key = c.key
       RETURNING w.kind, w.key, w.shard, w.seq, w.attempts, w.not_before`,
      [filter.claimant, filter.now, chosen.map((r) => r.kind), chosen.map((r) => r.key)],
    );
    return rows
      .map((r) => ({
        kind: r.kind,
        key: r.key,
        shard: r.shard,
        seq: r.seq,
        attempts: r.attempts,
        notBefore: r.not_before,
      }))
      .sort((a, b) => a.notBefore.getTime() - b.notBefore.getTime());
  });
}

const RELEASE_CLAIM = 'claimed_by = NULL, claimed_at = NULL, enqueued_not_before = NULL';

/**
 * Finishes an item whose reconciler returned nothing: deletes it if no enqueue arrived since the claim, else keeps it
 * due at the earliest time those enqueues asked for. Attempts reset either way.
 *
 * @example
 * ```ts
 * await db.transaction((tx) => finishDone(tx, item, clock.now()));
 * ```
 */
export async function finishDone(tx: SqlExecutor, item: ClaimedItem, now: Date): Promise<void> {
  // Two statements, not one: the second gets a fresh snapshot, so it sees an enqueue that committed while the DELETE
  // waited for its row lock.
  const deleted = await tx.query('DELETE FROM work_items WHERE kind = $1 AND key = $2 AND seq = $3', [
    item.kind,
    item.key,
    item.seq,
  ]);
  if (deleted.rowCount > 0) return;
  await tx.query(
    `UPDATE work_items SET not_before = COALESCE(enqueued_not_before, not_before), attempts = 0, last_error = NULL,
       ${RELEASE_CLAIM}, updated_at = $3
     WHERE kind = $1 AND key = $2`,
    [item.kind, item.key, now],
  );
}

/**
 * Finishes an item whose reconciler asked to run again after `delayMs`: due then, or earlier if an enqueue since the
 * claim asked for earlier. Attempts reset.
 *
 * @example
 * ```ts
 * await db.transaction((tx) => finishRequeued(tx, item, clock.now(), 30_000));
 * ```
 */
export async function finishRequeued(tx: SqlExecutor, item: ClaimedItem, now: Date, delayMs: number): Promise<void> {
  await tx.query(
    `UPDATE work_items SET not_before = LEAST($3::timestamptz, enqueued_not_before), attempts = 0, last_error = NULL,
       ${RELEASE_CLAIM}, updated_at = $4
     WHERE kind = $1 AND key = $2`,
    [item.kind, item.key, addMs(now, delayMs), now],
  );
}

/**
 * Finishes an item whose reconciler failed: one more attempt counted, the error text kept, due again after
 * `delayMs` (the backoff) or earlier if an enqueue since the claim asked for earlier.
 *
 * @example
 * ```ts
 * await db.transaction((tx) => finishFailed(tx, item, clock.now(), 4_000, 'TIMEOUT: no answer'));
 * ```
 */
export async function finishFailed(
  tx: SqlExecutor,
  item: ClaimedItem,
  now: Date,
  delayMs: number,
  error: string,
): Promise<void> {
  await tx.query(
    `UPDATE work_items SET not_before = LEAST($3::timestamptz, enqueued_not_before), attempts = $4, last_error = $5,
       ${RELEASE_CLAIM}, updated_at = $6
     WHERE kind = $1 AND key = $2`,
    [item.kind, item.key, addMs(now, delayMs), item.attempts + 1, error, now],
  );
}
