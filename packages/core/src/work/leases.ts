import type { SqlExecutor } from '../sql/executor';
import { sendNotifications } from '../sql/notifications';
import { REBALANCE_PAYLOAD, WORK_CHANNEL } from './types';

// What tells every listening worker to rebalance at once.
const REBALANCE_NOTIFICATION = { channel: WORK_CHANNEL, payload: REBALANCE_PAYLOAD } as const;

// Every time below is a Clock time passed as a parameter: SQL never decides by now().

/**
 * Registers a worker, or revives a row with the same id (a restarted process), as live from `now`.
 *
 * @example
 * ```ts
 * await heartbeat(db, 'wrk_01k…', clock.now());
 * ```
 */
export async function heartbeat(db: SqlExecutor, workerId: string, now: Date): Promise<void> {
  await db.query(
    `INSERT INTO workers (id, started_at, heartbeat_at) VALUES ($1, $2, $2)
     ON CONFLICT (id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at, stopped_at = NULL`,
    [workerId, now],
  );
}

/**
 * The ids of live workers, sorted: not stopped, and a heartbeat after `since` (now minus the lease time).
 *
 * @example
 * ```ts
 * const live = await liveWorkerIds(db, addMs(now, -leaseMs));
 * ```
 */
export async function liveWorkerIds(db: SqlExecutor, since: Date): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    'SELECT id FROM workers WHERE stopped_at IS NULL AND heartbeat_at > $1 ORDER BY id',
    [since],
  );
  return rows.map((r) => r.id);
}

/**
 * Extends the leases this worker holds on `shards` and returns each shard still held with its epoch. A shard
 * missing from the answer was taken over.
 *
 * @example
 * ```ts
 * const held = await renewLeases(db, workerId, [0, 3], addMs(now, leaseMs));
 * ```
 */
export async function renewLeases(
  db: SqlExecutor,
  workerId: string,
  shards: readonly number[],
  expiresAt: Date,
): Promise<Map<number, number>> {
  if (shards.length === 0) return new Map();
  const { rows } = await db.query<{ shard: number; epoch: number }>(
    `UPDATE shard_leases SET expires_at = $3 WHERE worker_id = $1 AND shard = ANY($2::int[]) RETURNING shard, epoch`,
    [workerId, [...shards], expiresAt],
  );
  return new Map(rows.map((r) => [r.shard, r.epoch]));
}

/**
 * Takes the leases on `shards` that are free (released or never held), expired at `now`, or held by this same
 * worker id (an earlier incarnation). Every takeover increments the epoch, which fences the previous holder. Returns
 * the shards acquired with their new epochs.
 *
 * @example
 * ```ts
 * const acquired = await acquireLeases(db, workerId, [1, 4], now, addMs(now, leaseMs));
 * ```
 */
export async function acquireLeases(
  db: SqlExecutor,
  workerId: string,
  shards: readonly number[],
  now: Date,
  expiresAt: Date,
): Promise<Map<number, number>> {
  if (shards.length === 0) return new Map();
  // Rows are taken in shard order, so two workers acquiring overlapping sets cannot deadlock.
  const { rows } = await db.query<{ shard: number; epoch: number }>(
    `INSERT INTO shard_leases AS l (shard, worker_id, epoch, expires_at, acquired_at)
     SELECT s, $1, 1, $3, $2 FROM unnest($4::int[]) AS s ORDER BY s
     ON CONFLICT (shard) DO UPDATE SET worker_id = EXCLUDED.worker_id, epoch = l.epoch + 1,
       expires_at = EXCLUDED.expires_at, acquired_at = EXCLUDED.acquired_at
     WHERE l.worker_id IS NULL OR l.expires_at <= $2 OR l.worker_id = $1
     RETURNING l.shard, l.epoch`,
    [workerId, now, expiresAt, [...shards].sort((a, b) => a - b)],
  );
  return new Map(rows.map((r) => [r.shard, r.epoch]));
}

/**
 * Gives up this worker's leases on `shards` (all of them when omitted), so the assigned worker can take them at once
 * instead of waiting for expiry; when it gave any up, it announces it once committed (REBALANCE_PAYLOAD), so the
 * new owner does not wait for its next heartbeat either.
 *
 * @example
 * ```ts
 * await releaseLeases(db, workerId, now, [7]);
 * ```
 */
export async function releaseLeases(
  db: SqlExecutor,
  workerId: string,
  now: Date,
  shards?: readonly number[],
): Promise<number[]> {
  const params: unknown[] = [workerId, now];
  let where = 'worker_id = $1';
  if (shards) {
    if (shards.length === 0) return [];
    params.push([...shards]);
    where += ' AND shard = ANY($3::int[])';
  }
  const { rows } = await db.query<{ shard: number }>(
    `UPDATE shard_leases SET worker_id = NULL, expires_at = $2 WHERE ${where} RETURNING shard`,
    params,
  );
  if (rows.length > 0) await sendNotifications(db, [REBALANCE_NOTIFICATION]);
  return rows.map((r) => r.shard);
}

/**
 * Marks a worker stopped, and announces it (REBALANCE_PAYLOAD) once committed: it leaves the live set at once
 * rather than after its heartbeat goes stale, and the others rebalance at once rather than at their next heartbeat.
 *
 * @example
 * ```ts
 * await markStopped(db, workerId, clock.now());
 * ```
 */
export async function markStopped(db: SqlExecutor, workerId: string, now: Date): Promise<void> {
  const { rowCount } = await db.query('UPDATE workers SET stopped_at = $2 WHERE id = $1', [workerId, now]);
  if (rowCount > 0) await sendNotifications(db, [REBALANCE_NOTIFICATION]);
}

/**
 * Tells every listening worker to rebalance now (see REBALANCE_PAYLOAD): when a worker joins. (A stop and a release
 * announce themselves after their own statements.) Sent after what the caller committed, so the others see it.
 *
 * @example
 * ```ts
 * await announceRebalance(db);
 * ```
 */
export async function announceRebalance(db: SqlExecutor): Promise<void> {
  await sendNotifications(db, [REBALANCE_NOTIFICATION]);
}

/**
 * Forgets workers not heard from since `before` (long dead or stopped), other than `keep`.
 *
 * @example
 * ```ts
 * await pruneWorkers(db, addMs(now, -3_600_000), workerId);
 * ```
 */
export async function pruneWorkers(db: SqlExecutor, before: Date, keep: string): Promise<void> {
  await db.query('DELETE FROM workers WHERE heartbeat_at < $1 AND id <> $2', [before, keep]);
}

/**
 * The earliest `not_before` among items of `shards` whose key is not in `busyKeys`, or undefined when none.
 *
 * @example
 * ```ts
 * const next = await earliestDue(db, [0, 3], ['node_01k…']);
 * ```
 */
export async function earliestDue(
  db: SqlExecutor,
  shards: readonly number[],
  busyKeys: readonly string[],
): Promise<Date | undefined> {
  if (shards.length === 0) return undefined;
  const { rows } = await db.query<{ at: Date | null }>(
    'SELECT min(not_before) AS at FROM work_items WHERE shard = ANY($1::int[]) AND NOT (key = ANY($2::text[]))',
    [[...shards], [...busyKeys]],
  );
  return rows[0]?.at ?? undefined;
}
