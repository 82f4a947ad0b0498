import { AsyncLocalStorage } from 'node:async_hooks';
import type { PGlite } from '@electric-sql/pglite';
import { ComputeError } from '../errors';
import type { NotificationHandler, QueryResult, Row, SqlDatabase, SqlExecutor } from '../sql/executor';
import { Mutex } from '../sql/mutex';
import { runInSavepoint } from '../sql/savepoint';
import { toSqlError } from '../sql/sql-error';

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
  constructor(private readonly pg: PGlite) {}

  query<R = Row>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
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
    return this.#mutex.run(() =>
      this.#inTransaction.run(true, async () => {
        await runQuery(this.client, 'BEGIN', undefined);
        let result: T;
        try {
          result = await fn(new PgliteTransaction(this.client));
        } catch (err) {
          await runQuery(this.client, 'ROLLBACK', undefined).catch(() => undefined);
          throw err;
        }
        await runQuery(this.client, 'COMMIT', undefined);
        return result;
      }),
    );
  }

  async listen(channel: string, handler: NotificationHandler): Promise<() => Promise<void>> {
    this.#guard();
    const unsubscribe = await this.#mutex.run(() => this.client.listen(channel, handler));
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
