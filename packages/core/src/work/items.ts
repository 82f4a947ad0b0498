import { type Bind, bindParams } from '../sql/bind-params';
import type { SqlExecutor } from '../sql/executor';
import { URGENT_LEAD_MS } from './types';

/** A work item as claimed: what finishing it needs to know. */
export interface ClaimedItem {
  kind: string;
  key: string;
  shard: number;
  /** `seq` at claim time; a different value when finishing means an enqueue arrived meanwhile. */
  seq: number;
  attempts: number;
  notBefore: Date;
  /** Claimed as urgent (ahead of routine items; see `WorkRequest.urgent`). */
  urgent: boolean;
  /**
   * What the kind's preload read in the claim's statement (see {@link ClaimFilter.preload}); absent when the kind has
   * none, or when an enqueue committed between the statement's snapshot and its lock on the item (the read would miss
   * what that wake was for).
   */
  preloaded?: unknown;
}

/** Which due items to claim. */
export interface ClaimFilter {
  /** Recorded in `claimed_by`, for operators. */
  claimant: string;
  now: Date;
  limit: number;
  /** Of those, at most this many routine (not urgent) items; default `limit`. A worker keeps room for urgent ones. */
  routineLimit?: number;
  /** Only these shards; every shard when omitted. */
  shards?: readonly number[];
  /** Keys already in flight here: never a second item with the same key at once. */
  busyKeys?: readonly string[];
  /** Only shards whose lease this worker holds (checked in the same statement). */
  leaseHolder?: string;
  /** At most one item per key (for concurrent processing). Default true. */
  distinctKeys?: boolean;
  /**
   * By kind: a scalar SQL expression of the claimed item's key and the claim's now (given as SQL expressions), read by
   * the claim's own statement and returned as the item's `preloaded` (see `ReconcilerPreload`).
   */
  preload?: ReadonlyMap<string, (key: string, now: string) => string>;
  /**
   * By kind: the boolean SQL expression of a parked item's `park_on` and now (see `ReconcilerPark`). A due parked item
   * whose expression is true (and whose `park_until` is still ahead) is not claimed: the same statement postpones it by
   * its `park_every_ms`, never past its `park_until`. Without it, parked items are claimed as any other.
   */
  park?: ReadonlyMap<string, (on: string, now: string) => string>;
  /**
   * Commit the claim without waiting for its WAL to reach disk (`synchronous_commit = off` for its own transaction).
   * Only for a claim that commits on its own (not inside a caller's transaction, which it would relax too). Losing such
   * a claim in a server crash loses nothing: the item is as it was, due, and is claimed again; and any later write of
   * the pass, committed durably, flushes the claim's WAL first. The worker sets it: it saves a disk flush on the path
   * from a result to the next command.
   */
  relaxedCommit?: boolean;
}

interface ItemRow {
  kind: string;
  key: string;
  shard: number;
  seq: number;
  attempts: number;
  not_before: Date;
  claim_order: Date;
  urgent: boolean | null;
  next_due: Date | null;
  preload_ok: boolean | null;
  preloaded: unknown;
}

/**
 * Claims due items, due first (an urgent item as if due {@link URGENT_LEAD_MS} earlier), skipping rows another
 * transaction holds (`FOR UPDATE SKIP LOCKED`), at most one per key. A claim does not exclude anyone: only the shard's
 * owner claims, and it may take over an item claimed by a dead or fenced worker at once. It resets
 * `enqueued_not_before` and `urgent`, so finishing sees only enqueues made after the claim.
 *
 * @example
 * ```ts
 * const items = await claimDueItems(db, { claimant: workerId, now: clock.now(), limit: 8, shards: [0, 5] });
 * ```
 */
export async function claimDueItems(db: SqlExecutor, filter: ClaimFilter): Promise<ClaimedItem[]> {
  return (await claim(db, filter, false)).items;
}

/** What {@link claimDueItemsAndNext} returns. */
export interface ClaimAndNext {
  items: ClaimedItem[];
  /**
   * The earliest `not_before` among the other items of the same shards whose key is neither busy nor just claimed
   * (due ones locked elsewhere included), read by the same statement; undefined when there are none.
   */
  nextDueAt: Date | undefined;
}

/**
 * {@link claimDueItems}, and in the same statement when the next item of those shards falls due, so a worker that
 * claimed less than it could knows how long to sleep without a second query.
 *
 * @example
 * ```ts
 * const { items, nextDueAt } = await claimDueItemsAndNext(db, { claimant: workerId, now, limit: 8, shards: [0, 5] });
 * ```
 */
export function claimDueItemsAndNext(db: SqlExecutor, filter: ClaimFilter): Promise<ClaimAndNext> {
  return claim(db, filter, true);
}

async function claim(db: SqlExecutor, filter: ClaimFilter, withNext: boolean): Promise<ClaimAndNext> {
  const routineLimit = Math.min(filter.limit, filter.routineLimit ?? filter.limit);
  const { bind, params } = bindParams();
  const now = bind(filter.now);
  const busyKeys = bind([...(filter.busyKeys ?? [])]);
  const urgentRead = bind(filter.limit * 2);
  const limit = bind(filter.limit);
  const claimant = bind(filter.claimant);
  const routineRead = bind(routineLimit * 2);
  const routineCap = bind(routineLimit);
  let scope = `NOT (w.key = ANY(${busyKeys}::text[]))`;
  if (filter.shards) scope += ` AND w.shard = ANY(${bind([...filter.shards])}::int[])`;
  const where = `w.not_before <= ${now} AND ${scope}`;
  // The lease check applies to what was picked, not while picking: as a join it made the planner read and sort the
  // whole backlog instead of walking the index to the limit.
  let held = 'TRUE';
  if (filter.leaseHolder !== undefined) {
    held = `EXISTS (SELECT 1 FROM shard_leases l WHERE l.shard = r.shard AND l.worker_id = ${bind(filter.leaseHolder)})`;
  }
  const distinct = filter.distinctKeys ?? true;
  // The next due item: a row of its own after the claimed ones, read in the statement's snapshot, where the claimed
  // rows still look due, hence the exclusion of their keys. ORDER BY … LIMIT 1 walks the not_before index and stops
  // at the first row (a min() beside the anti-join would read the whole queue).
  const parked = parkedParts(filter.park, bind, now, held);
  const next = withNext
    ? `UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, ${parked.nextDue(`(SELECT w.not_before FROM work_items w
         WHERE ${scope} AND NOT EXISTS (SELECT 1 FROM chosen c WHERE c.key = w.key)${parked.notParked('w')}
         ORDER BY w.not_before LIMIT 1)`)},
         NULL, NULL`
    : '';
  const preload = preloadColumns(filter.preload, bind, now);
  // set_config(…, true) lasts until the end of the statement's own transaction and is read when that commits. It is
  // a one-time filter of the first candidates' scan, which every claim runs.
  const relaxed = filter.relaxedCommit
    ? {
        cte: "relaxed AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true) AS setting),",
        condition: 'AND (SELECT setting FROM relaxed) IS NOT NULL',
      }
    : { cte: '', condition: '' };
  // One statement, so a claim is one round trip: lock twice the limit (so items whose key repeats, another kind of
  // the same node, leave room for others), keep the first of each key, and mark those claimed. The rows locked but
  // not chosen are free again when the statement ends. Urgent items are ordered as if due URGENT_LEAD_MS earlier:
  // each kind is read in not_before order from an index of its own (so a claim reads about the limit, whatever the
  // backlog) and the two are merged; the global first `limit` are among the first 2 × limit of their kind. Routine
  // items are capped at `routineCap` (read: twice that).
  const { rows } = await db.query<ItemRow>(
    `WITH ${relaxed.cte} urgent_candidates AS (
       SELECT w.kind, w.key, w.shard, w.not_before - interval '${URGENT_LEAD_MS} milliseconds' AS claim_order,
         true AS urgent${parked.columns}
       FROM work_items w WHERE ${where} AND w.urgent ${relaxed.condition}
       ORDER BY w.not_before, w.kind, w.key LIMIT ${urgentRead} FOR UPDATE OF w SKIP LOCKED
     ), routine_candidates AS (
       SELECT w.kind, w.key, w.shard, w.not_before AS claim_order, false AS urgent${parked.columns}
       FROM work_items w WHERE ${where} AND NOT w.urgent
       ORDER BY w.not_before, w.kind, w.key LIMIT ${routineRead} FOR UPDATE OF w SKIP LOCKED
     ), candidates AS (
       SELECT * FROM urgent_candidates UNION ALL SELECT * FROM routine_candidates
     )${parked.ctes}, ranked AS (
       SELECT kind, key, claim_order, urgent,
         ${distinct ? 'row_number() OVER (PARTITION BY key ORDER BY claim_order, kind)' : '1'} AS nth
       FROM candidates r WHERE ${held}${parked.notParked('r')}
     ), firsts AS (
       SELECT kind, key, claim_order, urgent,
         row_number() OVER (PARTITION BY urgent ORDER BY claim_order, kind, key) AS nth_of_class
       FROM ranked WHERE nth = 1
     ), chosen AS (
       SELECT kind, key, claim_order, urgent FROM firsts WHERE urgent OR nth_of_class <= ${routineCap}
       ORDER BY claim_order, kind, key LIMIT ${limit}
     ), claimed AS (
       UPDATE work_items w SET claimed_by = ${claimant}, claimed_at = ${now}, enqueued_not_before = NULL, urgent = false,
         park_on = NULL
       FROM chosen c WHERE w.kind = c.kind AND w.key = c.key
       RETURNING w.kind, w.key, w.shard, w.seq, w.attempts, w.not_before, c.claim_order, c.urgent
     )
     SELECT c.kind, c.key, c.shard, c.seq, c.attempts, c.not_before, c.claim_order, c.urgent,
       NULL::timestamptz AS next_due,
       ${preload.columns} FROM claimed c ${preload.join}
     ${next}`,
    params,
  );
  const claimedRows = rows.filter((r) => r.kind !== null);
  const nextDue = rows.find((r) => r.kind === null)?.next_due;
  const items = claimedRows
    .sort(
      (a, b) =>
        new Date(a.claim_order).getTime() - new Date(b.claim_order).getTime() ||
        cmp(a.kind, b.kind) ||
        cmp(a.key, b.key),
    )
    .map((r) => ({
      kind: r.kind,
      key: r.key,
      shard: r.shard,
      seq: r.seq,
      attempts: r.attempts,
      notBefore: r.not_before,
      urgent: r.urgent === true,
      ...(r.preload_ok === true && filter.preload?.has(r.kind) ? { preloaded: r.preloaded } : {}),
    }));
  return { items, nextDueAt: nextDue ? new Date(nextDue) : undefined };
}

/**
 * The parts of a claim that parks (see {@link ClaimFilter.park}): the park columns each candidate carries, the
 * `parked` CTE (due parked items in held shards whose wait still holds, with when each is due again) and the
 * `postponed` one that writes that, the condition that keeps them out of a read (on a work_items alias), and the next
 * due time including theirs. All empty without parks, so such a claim is the statement it always was.
 */
function parkedParts(
  park: ReadonlyMap<string, (on: string, now: string) => string> | undefined,
  bind: Bind,
  now: string,
  held: string,
): { columns: string; ctes: string; notParked: (alias: string) => string; nextDue: (others: string) => string } {
  if (!park || park.size === 0) return { columns: '', ctes: '', notParked: () => '', nextDue: (others) => others };
  const at = `${now}::timestamptz`;
  const branches = [...park].map(([kind, build]) => `WHEN r.kind = ${bind(kind)} THEN (${build('r.park_on', at)})`);
  return {
    columns: ', w.park_on, w.park_every_ms, w.park_until',
    ctes: `, parked AS (
       SELECT r.kind, r.key, LEAST(${at} + r.park_every_ms * interval '1 millisecond', r.park_until) AS due
       FROM candidates r
       WHERE r.park_on IS NOT NULL AND r.park_every_ms IS NOT NULL AND (r.park_until IS NULL OR r.park_until > ${at})
         AND ${held} AND (CASE ${branches.join(' ')} END) IS TRUE
     ), postponed AS (
       UPDATE work_items w SET not_before = p.due, updated_at = ${at} FROM parked p WHERE w.kind = p.kind AND w.key = p.key
       RETURNING w.kind
     )`,
    notParked: (alias) =>
      ` AND NOT EXISTS (SELECT 1 FROM parked p WHERE p.kind = ${alias}.kind AND p.key = ${alias}.key)`,
    nextDue: (others) => `LEAST(${others}, (SELECT min(p.due) FROM parked p))`,
  };
}

/**
 * The claim's `preload_ok` and `preloaded` columns. A preload is read in the statement's snapshot, but the item's row
 * is locked as last committed: an enqueue that committed in between (seq bumped) is for something the snapshot does
 * not show, so then nothing is preloaded and the reconciler reads for itself. The subquery on work_items reads the
 * snapshot's version, which the claim's own update does not change.
 */
function preloadColumns(
  preload: ReadonlyMap<string, (key: string, now: string) => string> | undefined,
  bind: Bind,
  now: string,
): { columns: string; join: string } {
  if (!preload || preload.size === 0)
    return { columns: 'NULL::boolean AS preload_ok, NULL::json AS preloaded', join: '' };
  const at = `${now}::timestamptz`;
  const branches = [...preload].map(
    ([kind, build]) => `WHEN c.kind = ${bind(kind)} THEN to_json(${build('c.key', at)})`,
  );
  return {
    columns: `p.ok AS preload_ok, CASE WHEN NOT p.ok THEN NULL ${branches.join(' ')} END AS preloaded`,
    join: `CROSS JOIN LATERAL (SELECT coalesce((SELECT s.seq FROM work_items s
       WHERE s.kind = c.kind AND s.key = c.key) = c.seq, false) AS ok) p`,
  };
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
