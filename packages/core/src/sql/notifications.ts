import type { Notification, SqlExecutor } from './executor';

/** One statement that sends any number of notifications; its parameters are {@link notificationParams}. */
export const NOTIFY_SQL =
  'SELECT count(pg_notify(n.channel, n.payload))::int AS sent FROM unnest($1::text[], $2::text[]) AS n (channel, payload)';

/**
 * {@link NOTIFY_SQL} as a transaction of its own whose commit does not wait for its WAL flush
 * (`synchronous_commit` off for that transaction only): never for a statement inside a transaction that writes, whose
 * commit it would make asynchronous too.
 *
 * @example
 * ```ts
 * void client.unsafe(NOTIFY_ALONE_SQL, notificationParams(notifications));
 * ```
 */
export const NOTIFY_ALONE_SQL = `WITH relaxed AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true))
  SELECT count(pg_notify(n.channel, n.payload))::int AS sent FROM relaxed, unnest($1::text[], $2::text[]) AS n (channel, payload)`;

/**
 * Sends `notifications` once what `sql` wrote is committed: through the executor's own `notifyAfterCommit` when it has
 * one (PostgreSQL's handles: after the outermost COMMIT, in a statement of their own), else by `pg_notify` through
 * `sql` itself, which PostgreSQL delivers when the surrounding transaction commits (or at once outside one).
 *
 * Why not `pg_notify` inside the writing statement: PostgreSQL serialises the commits of every transaction that
 * notifies (one cluster-wide lock, held through the commit's WAL flush), so writes that notify cannot share a flush.
 * A transaction that only notifies, committed without waiting for its flush (PostgreSQL's handles send
 * {@link NOTIFY_ALONE_SQL}), holds that lock for microseconds.
 *
 * A wake-up is never what correctness rests on (every waiter also looks on a timer), so a process that stops between a
 * commit and its notifications only delays whoever waited.
 *
 * @example
 * ```ts
 * const { rows } = await sql.query('INSERT INTO commands … RETURNING node_id', params);
 * await sendNotifications(sql, rows.map((row) => ({ channel: COMMANDS_CHANNEL, payload: row.node_id })));
 * ```
 */
export async function sendNotifications(sql: SqlExecutor, notifications: readonly Notification[]): Promise<void> {
  if (notifications.length === 0) return;
  if (sql.notifyAfterCommit) return sql.notifyAfterCommit(notifications);
  await sql.query(NOTIFY_SQL, notificationParams(notifications));
}

/**
 * The two array parameters of the statement that sends `notifications` (channels, payloads).
 *
 * @example
 * ```ts
 * await db.query(NOTIFY_SQL, notificationParams([{ channel: 'bc_work', payload: '3' }]));
 * ```
 */
export function notificationParams(notifications: readonly Notification[]): [string[], string[]] {
  return [notifications.map((n) => n.channel), notifications.map((n) => n.payload)];
}
