import type { SqlExecutor } from './executor';
import { isSqlError } from './sql-error';

/** Options of {@link transactionWithRetry}. */
export interface RetryOptions {
  /** Attempts in all, including the first. Default 5. */
  attempts?: number;
  /** Backoff before the second attempt, doubled each time. Default 10 ms. */
  baseDelayMs?: number;
}

/**
 * Runs `fn` in a transaction and runs the whole transaction again when it fails with a retryable SQL error
 * (serialization failure, deadlock, lost connection). `fn` must be safe to run again: nothing it did in a failed
 * attempt was committed.
 *
 * @example
 * ```ts
 * await transactionWithRetry(db, (tx) => tx.query('UPDATE counters SET n = n + 1 WHERE id = $1', [id]));
 * ```
 */
export async function transactionWithRetry<T>(
  sql: SqlExecutor,
  fn: (tx: SqlExecutor) => Promise<T>,
  options: RetryOptions = {},
): Promise<T> {
  const attempts = options.attempts ?? 5;
  const base = options.baseDelayMs ?? 10;
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await sql.transaction(fn);
    } catch (err) {
      if (attempt >= attempts || !isSqlError(err) || !err.retryable) throw err;
      await new Promise((resolve) => setTimeout(resolve, base * 2 ** (attempt - 1)));
    }
  }
}
