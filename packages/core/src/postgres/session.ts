import postgres, { type Sql, type TransactionSql } from 'postgres';
import { ComputeError } from '../errors';
import type { Notification, NotificationHandler, QueryResult, Row, SqlDatabase, SqlExecutor } from '../sql/executor';
import { NOTIFY_ALONE_SQL, notificationParams } from '../sql/notifications';
import { SqlError, toSqlError } from '../sql/sql-error';

type AnySql = Sql | TransactionSql;

/** What every statement of a session is held to. */
export interface PostgresSessionLimits {
  /**
   * No answer after this long: the caller gets `connection-lost` (the statement is not cancelled from the client; the
   * server's `statement_timeout` ends one that is merely slow). 0: no limit.
   */
  queryTimeoutMs: number;
}

function noAnswer(ms: number): SqlError {
  return new SqlError(`no answer from the database within ${ms} ms`, {
    reason: 'connection-lost',
    cause: undefined,
  });
}

/**
 * Fails a wait with {@link noAnswer} once `ms` pass after the last `arm()`. No cancel request goes to the server: it
 * needs a connection of its own, and postgres.js leaves a failed one to an unhandled rejection.
 */
class AnswerTimer {
  readonly timedOut: Promise<never>;
  /** The limit ran out: whatever answers later was given up on. */
  expired = false;
  #timer: NodeJS.Timeout | undefined;
  #fail: (error: SqlError) => void = () => undefined;

  constructor(private readonly ms: number) {
    this.timedOut = new Promise<never>((_, reject) => {
      this.#fail = reject;
    });
    this.timedOut.catch(() => undefined);
  }

  arm(): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.expired = true;
      this.#fail(noAnswer(this.ms));
    }, this.ms);
  }

  clear(): void {
    clearTimeout(this.#timer);
  }
}

async function runQuery<R>(
  sql: AnySql,
  text: string,
  params: readonly unknown[] | undefined,
  limits: PostgresSessionLimits,
): Promise<QueryResult<R>> {
  const answer = limits.queryTimeoutMs > 0 ? new AnswerTimer(limits.queryTimeoutMs) : undefined;
  try {
    // Statements with parameters are the kernel's fixed hot-path texts: preparing them saves a parse and plan per
    // call. Statements without (DDL, savepoints with generated names) stay unnamed, so the per-connection cache of
    // prepared statements cannot grow without bound.
    const prepare = params !== undefined && params.length > 0;
    // biome-ignore lint/suspicious/noExplicitAny: postgres.js types parameters as its own serializable union
    const pending = sql.unsafe(text, params ? ([...params] as any[]) : undefined, { prepare });
    answer?.arm();
    const result = await (answer ? Promise.race([pending, answer.timedOut]) : pending);
    return { rows: [...result] as R[], rowCount: result.count ?? result.length };
  } catch (err) {
    throw toSqlError(err);
  } finally {
    answer?.clear();
  }
}

class PostgresTransaction implements SqlExecutor {
  constructor(
    private readonly sql: TransactionSql,
    private readonly limits: PostgresSessionLimits,
    /** What this scope asked to notify after commit; the session sends it once the outermost COMMIT is done. */
    private readonly pending: Notification[],
  ) {}

  query<R = Row>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
    return runQuery<R>(this.sql, text, params, this.limits);
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    // A savepoint's notifications join the transaction's only when it is released: rolled back, they go with it.
    const own: Notification[] = [];
    // SAVEPOINT and ROLLBACK TO are the driver's own statements, outside runQuery's limit: bounded as BEGIN is.
    const value = await scoped((inner) => this.sql.savepoint(inner) as Promise<T>, fn, this.limits, own);
    this.pending.push(...own);
    return value;
  }

  async notifyAfterCommit(notifications: readonly Notification[]): Promise<void> {
    this.pending.push(...notifications);
  }
}

/**
 * Runs `fn` in a scope the driver opens and closes (a transaction, a savepoint). What `fn` throws passes through
 * (a database error it met is a SqlError already), even when the rollback after it failed too. Anything else failed around it, in the driver's own statements or
 * bookkeeping: a known error is classified, and an unknown one is `connection-lost` too, since the scope's outcome is
 * unknown to the caller exactly as when its connection is lost (and a caller retries that).
 */
async function scoped<T>(
  open: (inner: (tx: TransactionSql) => Promise<T>) => Promise<T>,
  fn: (tx: SqlExecutor) => Promise<T>,
  limits: PostgresSessionLimits,
  pending: Notification[],
): Promise<T> {
  let own: { error: unknown } | undefined;
  const run = async (tx: TransactionSql) => {
    try {
      return await fn(new PostgresTransaction(tx, limits, pending));
    } catch (error) {
      own = { error };
      throw error;
    }
  };
  try {
    if (limits.queryTimeoutMs === 0) return await open(run);
    return await boundedScope(open, run, limits.queryTimeoutMs);
  } catch (err) {
    // The callback failed: nothing of the scope was committed, whatever its rollback met, so its error is the answer.
    if (own !== undefined) throw classifyDriverError(own.error);
    throw driverFailure(err);
  }
}

function driverFailure(err: unknown): unknown {
  const classified = classifyDriverError(err);
  if (classified !== err || err instanceof SqlError || err instanceof ComputeError) return classified;
  const code = (err as { code?: unknown } | null)?.code;
  const named = typeof code === 'string' && /^[A-Z0-9_]{1,64}$/.test(code) ? ` (${code})` : '';
  return new SqlError(`the database driver failed around a transaction${named}`, {
    reason: 'connection-lost',
    cause: err,
  });
}

/**
 * Runs `run` in a scope the driver opens and closes with statements of its own (BEGIN with the wait for a
 * connection and COMMIT or ROLLBACK; SAVEPOINT and ROLLBACK TO): each of those must answer within `limit`, or the
 * caller (a worker's key) would wait on a silent connection without end. The callback itself runs as long as it
 * likes; its statements have their own limit. A scope that opens after the caller was told it failed is rolled back.
 */
async function boundedScope<T>(
  open: (inner: (tx: TransactionSql) => Promise<T>) => Promise<T>,
  run: (tx: TransactionSql) => Promise<T>,
  limit: number,
): Promise<T> {
  const answer = new AnswerTimer(limit);
  answer.arm();
  const work = open(async (tx) => {
    if (answer.expired) throw noAnswer(limit);
    answer.clear();
    try {
      return await run(tx);
    } finally {
      answer.arm();
    }
  });
  work.catch(() => undefined);
  try {
    return await Promise.race([work, answer.timedOut]);
  } finally {
    answer.clear();
  }
}

const CONNECTION_ERROR = /^(CONNECT_TIMEOUT|CONNECTION_[A-Z]+|E[A-Z]+)$/;

// Errors thrown by the caller's own callback pass through untouched; only the driver's own errors (a failed BEGIN or
// COMMIT, a lost connection) are classified.
function classifyDriverError(err: unknown): unknown {
  if (err instanceof postgres.PostgresError) return toSqlError(err);
  const code = (err as { code?: unknown } | null)?.code;
  if (err instanceof Error && typeof code === 'string' && CONNECTION_ERROR.test(code)) return toSqlError(err);
  return err;
}

/** The postgres.js session: a pool of connections to a real PostgreSQL server. */
export class PostgresSession implements SqlDatabase {
  readonly backend = 'postgres' as const;
  #closed = false;

  constructor(
    readonly client: Sql,
    private readonly limits: PostgresSessionLimits = { queryTimeoutMs: 0 },
  ) {}

  query<R = Row>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
    if (this.#closed) return Promise.reject(new ComputeError('INVALID_STATE', 'the database is closed'));
    return runQuery<R>(this.client, text, params, this.limits);
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    if (this.#closed) throw new ComputeError('INVALID_STATE', 'the database is closed');
    const pending: Notification[] = [];
    const value = await scoped((inner) => this.client.begin(inner) as Promise<T>, fn, this.limits, pending);
    void this.notifyAfterCommit(pending);
    return value;
  }

  /**
   * Sends the notifications at once, in a transaction of their own committed without waiting for its WAL flush, so it
   * holds PostgreSQL's notification lock only for as long as queueing them takes (a transaction that notifies holds
   * that lock through its commit; PostgreSQL 15 gives even a notification-only one a transaction id and a commit
   * record to flush). Nothing is lost by not waiting: a notification is gone with a crash either way, and what it
   * announces was committed, durably, before. Resolves without waiting for the answer: what they
   * announce is committed already, so the caller goes on (a reconciler's next statement, an agent's reply) while they
   * travel. A failure is dropped: it is not the caller's, and every waiter also looks on a timer.
   */
  notifyAfterCommit(notifications: readonly Notification[]): Promise<void> {
    if (notifications.length > 0 && !this.#closed) {
      void runQuery(this.client, NOTIFY_ALONE_SQL, notificationParams(notifications), this.limits).catch(
        () => undefined,
      );
    }
    return Promise.resolve();
  }

  async listen(channel: string, handler: NotificationHandler, onListen?: () => void): Promise<() => Promise<void>> {
    // postgres.js re-subscribes on its own after the listening connection reconnects, and says so through onlisten.
    const subscription = await this.client.listen(channel, handler, onListen);
    return () => subscription.unlisten();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.client.end({ timeout: 5 });
  }
}
