/** A row as the database returns it. */
export type Row = Record<string, unknown>;

/** What a query returns. `rowCount` counts affected rows for writes and returned rows for reads. */
export interface QueryResult<R = Row> {
  rows: R[];
  rowCount: number;
}

/**
 * The one port every module and plugin talks to the database through.
 *
 * Parameters are `$1`, `$2`, …; pass JSON as its text (`JSON.stringify(value)`) with a `::jsonb` cast, arrays as JS arrays with a cast
 * (`$1::text[]`), times as `Date`. `int8` columns come back as numbers, `timestamptz` as `Date`, `jsonb` parsed.
 *
 * @example
 * ```ts
 * await sql.transaction(async (tx) => {
 *   const { rows } = await tx.query<{ id: string }>('SELECT id FROM nodes WHERE site_id = $1', [siteId]);
 *   await tx.transaction(async (inner) => inner.query('UPDATE …')); // a savepoint
 * });
 * ```
 */
export interface SqlExecutor {
  query<R = Row>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>>;
  /** Commits when `fn` resolves, rolls back when it throws; nested calls use savepoints. */
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  /**
   * Optional. Sends `NOTIFY`s once this executor's writes are committed, in a statement of their own: on a
   * transaction's handle after the outermost COMMIT (dropped with a rolled-back savepoint or transaction), on the
   * database's handle at once. It may resolve before the server answered (PostgreSQL's handle does not wait: what
   * they announce is committed already). The kernel calls it through `sendNotifications`, which falls back to
   * `pg_notify` through `query` (inside the transaction) when an executor lacks it. A wrapper forwards it.
   */
  notifyAfterCommit?(notifications: readonly Notification[]): Promise<void>;
}

/** One `NOTIFY`: its channel and payload. */
export interface Notification {
  readonly channel: string;
  readonly payload: string;
}

/** A handler for notifications on a channel. */
export type NotificationHandler = (payload: string) => void;

/**
 * A database handle owned by the process: an executor that can also listen for notifications and be closed.
 *
 * @example
 * ```ts
 * const db = await createPgliteDatabase();
 * const stop = await db.listen('bc_work', (payload) => console.log(payload));
 * await stop();
 * await db.close();
 * ```
 */
export interface SqlDatabase extends SqlExecutor {
  readonly backend: 'pglite' | 'postgres';
  /**
   * Subscribes to `NOTIFY` on a channel; resolves to an unsubscribe function. `onListen` is called each time the
   * subscription is in place: once at the start, and on PostgreSQL again after the listening connection was lost and
   * came back, when whatever was notified meanwhile is gone, so a listener that trusts its notifications re-checks then.
   */
  listen(channel: string, handler: NotificationHandler, onListen?: () => void): Promise<() => Promise<void>>;
  /** Closes every connection. Further queries fail. */
  close(): Promise<void>;
}
