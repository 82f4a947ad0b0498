import { AsyncLocalStorage } from 'node:async_hooks';
import type { PGlite } from '@electric-sql/pglite';
import { ComputeError } from '../errors';
import type { NotificationHandler, QueryResult, Row, SqlDatabase, SqlExecutor } from '../sql/executor';
import { Mutex } from '../sql/mutex';
import { runInSavepoint } from '../sql/savepoint';
import { SqlError, toSqlError } from '../sql/sql-error';

/** What every transaction of a PGlite session is held to. */
export interface PgliteSessionLimits {
  /**
   * A transaction holding the one connection longer is rolled back and the connection handed on; its later statements
   * and its end fail `connection-lost` (as PostgreSQL's idle-in-transaction timeout ends a session). 0: no limit.
   */
  transactionTimeoutMs: number;
}

function expired(ms: number): SqlError {
  return new SqlError(`the transaction held the connection longer than ${ms} ms and was rolled back`, {
    reason: 'connection-lost',
    cause: undefined,
  });
}

async function runQuery<R>(pg: PGlite, text: string, params: readonly unknown[] | undefined): Promise<QueryResult<R>> {
  try {
    const result = await pg.query<R>(text, params ? [...params] : undefined);
    const returnsRows = result.fields.length > 0;
    return { rows: result.rows, rowCount: returnsRows ? result.rows.length : (result.affectedRows ?? 0) };
  } catch (err) {
    throw toSqlError(err);
  }
}

class PgliteTransaction implements SqlExecutor {
  /** Set once the transaction outlived its limit: it was rolled back, and the connection is someone else's. */
  expiredAfterMs: number | undefined;

  constructor(private readonly pg: PGlite) {}

  query<R = Row>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
    if (this.expiredAfterMs !== undefined) return Promise.reject(expired(this.expiredAfterMs));
    return runQuery<R>(this.pg, text, params);
  }

  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return runInSavepoint(this, () => fn(this));
  }
}

/**
 * The PGlite session: one connection shared by the process. A transaction owns the connection from BEGIN to COMMIT;
 * other callers queue behind it. A query on the database handle from inside that transaction's own callback would
 * wait for itself forever, so it is refused instead.
 */
export class PgliteSession implements SqlDatabase {
  readonly backend = 'pglite' as const;
  readonly #mutex = new Mutex();
  readonly #inTransaction = new AsyncLocalStorage<true>();
  #closed = false;

  constructor(
    readonly client: PGlite,
    private readonly ownsClient: boolean,
    private readonly limits: PgliteSessionLimits = { transactionTimeoutMs: 0 },
  ) {}

  #guard(): void {
    if (this.#closed) throw new ComputeError('INVALID_STATE', 'the database is closed');
    if (this.#inTransaction.getStore()) {
      throw new ComputeError(
        'INTERNAL',
        'query on the database handle from inside its own transaction; use the transaction executor (tx)',
      );
    }
  }

  async query<R = Row>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
    this.#guard();
    return this.#mutex.run(() => runQuery<R>(this.client, text, params));
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    this.#guard();
    let outcome: Promise<T> | undefined;
    await this.#mutex.run(() =>
      this.#inTransaction.run(true, async () => {
        await runQuery(this.client, 'BEGIN', undefined);
        const tx = new PgliteTransaction(this.client);
        // Set once COMMIT or ROLLBACK is under way: from then on the transaction ends on its own, limit or not.
        let ending = false;
        const work = (async () => fn(tx))().then(
          async (value) => {
            if (tx.expiredAfterMs !== undefined) throw expired(tx.expiredAfterMs);
            ending = true;
            await runQuery(this.client, 'COMMIT', undefined);
            return value;
          },
          async (err) => {
            if (tx.expiredAfterMs === undefined) {
              ending = true;
              await runQuery(this.client, 'ROLLBACK', undefined).catch(() => undefined);
            }
            throw err;
          },
        );
        outcome = work;
        const limit = this.limits.transactionTimeoutMs;
        if (limit === 0) return void (await work.catch(() => undefined));
        let timer: NodeJS.Timeout | undefined;
        const timedOut = await Promise.race([
          work.then(
            () => false,
            () => false,
          ),
          new Promise<boolean>((resolve) => {
            timer = setTimeout(() => resolve(true), limit);
          }),
        ]);
        clearTimeout(timer);
        if (!timedOut || ending) return void (await work.catch(() => undefined));
        // PGlite runs statements in the order they are sent, so one of fn's already under way finishes first.
        tx.expiredAfterMs = limit;
        await runQuery(this.client, 'ROLLBACK', undefined).catch(() => undefined);
      }),
    );
    return outcome as Promise<T>;
  }

  async listen(channel: string, handler: NotificationHandler, onListen?: () => void): Promise<() => Promise<void>> {
    this.#guard();
    const unsubscribe = await this.#mutex.run(() => this.client.listen(channel, handler));
    // In process: the subscription never drops, so it is in place once.
    onListen?.();
    return async () => {
      if (!this.#closed) await this.#mutex.run(() => unsubscribe());
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.ownsClient) await this.#mutex.run(() => this.client.close());
  }
}
