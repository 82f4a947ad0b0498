import { ComputeError, isComputeError } from '../errors';
import type { Notification, QueryResult, Row, SqlExecutor } from '../sql/executor';
import { sendNotifications } from '../sql/notifications';

/** The lease a worker processes an item under. */
export interface ShardLease {
  workerId: string;
  shard: number;
  epoch: number;
}

/**
 * Whether an error is the fencing refusal: this worker no longer holds the shard (at the epoch it claimed under).
 *
 * @example
 * ```ts
 * try { await ctx.sql.transaction(write); } catch (err) { if (isFencedError(err)) return; throw err; }
 * ```
 */
export function isFencedError(err: unknown): err is ComputeError {
  return isComputeError(err, 'INVALID_STATE') && err.details.reason === 'fenced';
}

/**
 * Checks, inside `tx`, that the worker still holds the shard at its epoch, and share-locks the lease row so a
 * takeover (which updates that row) waits until `tx` ends. Throws INVALID_STATE with `details.reason: 'fenced'`
 * otherwise.
 *
 * @example
 * ```ts
 * await db.transaction(async (tx) => { await assertLeaseHeld(tx, lease); await write(tx); });
 * ```
 */
export async function assertLeaseHeld(tx: SqlExecutor, lease: ShardLease): Promise<void> {
  const { rowCount } = await tx.query(leaseFenceSql(1), leaseFenceParams(lease));
  if (rowCount === 0) throw fencedError(lease);
}

/**
 * A SELECT that returns one row while `lease` is held at its epoch and share-locks the lease row (as
 * {@link assertLeaseHeld} does), for a CTE of a caller's own statement; its three parameters start at `$first` and
 * are {@link leaseFenceParams}.
 *
 * @example
 * ```ts
 * const text = `WITH fence AS (${leaseFenceSql(3)}) UPDATE nodes SET state = $2 WHERE id = $1 AND EXISTS (SELECT 1 FROM fence)`;
 * await ctx.sql.query(text, [id, 'ready', ...leaseFenceParams(lease)]);
 * ```
 */
export function leaseFenceSql(first: number): string {
  return `SELECT 1 FROM shard_leases WHERE shard = $${first} AND worker_id = $${first + 1} AND epoch = $${first + 2} FOR SHARE`;
}

/**
 * The parameters of {@link leaseFenceSql}, in order.
 *
 * @example
 * ```ts
 * const params = [id, ...leaseFenceParams(lease)];
 * ```
 */
export function leaseFenceParams(lease: ShardLease): unknown[] {
  return [lease.shard, lease.workerId, lease.epoch];
}

/**
 * The fencing refusal for a lease: INVALID_STATE with `details.reason: 'fenced'`.
 *
 * @example
 * ```ts
 * throw fencedError({ workerId, shard: 3, epoch: 7 });
 * ```
 */
export function fencedError(lease: ShardLease): ComputeError {
  return new ComputeError('INVALID_STATE', `worker ${lease.workerId} no longer holds shard ${lease.shard}`, {
    details: { reason: 'fenced', shard: lease.shard, epoch: lease.epoch },
  });
}

/**
 * The `sql` a reconciler gets from a worker. `transaction(fn)` first checks the shard lease (see
 * {@link assertLeaseHeld}), so a worker whose shard was taken over commits nothing. `query` outside a transaction is
 * not fenced: use it for reads, and make every write through `transaction`. Nested `tx.transaction` calls are
 * savepoints of the fenced transaction and need no second check.
 *
 * @example
 * ```ts
 * const sql = new FencedExecutor(db, { workerId, shard: 12, epoch: 3 });
 * await sql.transaction((tx) => tx.query('UPDATE nodes SET state = $2 WHERE id = $1', [id, 'ready']));
 * ```
 */
export class FencedExecutor implements SqlExecutor {
  constructor(
    private readonly db: SqlExecutor,
    readonly lease: ShardLease,
  ) {}

  query<R = Row>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
    return this.db.query<R>(text, params);
  }

  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return this.db.transaction(async (tx) => {
      await assertLeaseHeld(tx, this.lease);
      return fn(tx);
    });
  }

  notifyAfterCommit(notifications: readonly Notification[]): Promise<void> {
    return sendNotifications(this.db, notifications);
  }
}
