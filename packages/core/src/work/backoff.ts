import { ComputeError, isComputeError } from '../errors';
import { isSqlError } from '../sql/sql-error';
import type { BackoffOptions } from './types';

/**
 * The backoff after reconciler errors when none is configured: 1 s doubling to 5 minutes.
 *
 * @example
 * ```ts
 * backoffDelayMs(2, DEFAULT_BACKOFF); // 2000
 * ```
 */
export const DEFAULT_BACKOFF: Readonly<Required<BackoffOptions>> = Object.freeze({ baseMs: 1_000, maxMs: 300_000 });

/**
 * Checks backoff options and fills in the defaults.
 *
 * @example
 * ```ts
 * resolveBackoff({ baseMs: 50 }); // { baseMs: 50, maxMs: 300000 }
 * ```
 */
export function resolveBackoff(options: BackoffOptions | undefined, path: readonly string[] = ['backoff']) {
  const baseMs = options?.baseMs ?? DEFAULT_BACKOFF.baseMs;
  const maxMs = options?.maxMs ?? DEFAULT_BACKOFF.maxMs;
  if (!Number.isFinite(baseMs) || baseMs <= 0) {
    throw new ComputeError('INVALID_CONFIG', 'backoff.baseMs must be a positive number', {
      details: { path: [...path, 'baseMs'] },
    });
  }
  if (!Number.isFinite(maxMs) || maxMs < baseMs) {
    throw new ComputeError('INVALID_CONFIG', 'backoff.maxMs must be a number no smaller than baseMs', {
      details: { path: [...path, 'maxMs'] },
    });
  }
  return { baseMs, maxMs };
}

/**
 * The delay before the next attempt after `attempts` consecutive failures: `baseMs · 2^(attempts−1)`, capped at
 * `maxMs`.
 *
 * @example
 * ```ts
 * backoffDelayMs(1, DEFAULT_BACKOFF); // 1000
 * backoffDelayMs(3, DEFAULT_BACKOFF); // 4000
 * backoffDelayMs(30, DEFAULT_BACKOFF); // 300000
 * ```
 */
export function backoffDelayMs(attempts: number, backoff: Required<BackoffOptions>): number {
  const exponent = Math.min(Math.max(attempts - 1, 0), 40);
  return Math.min(backoff.maxMs, backoff.baseMs * 2 ** exponent);
}

/**
 * The longest backoff after a pass that failed only because the database did (a retryable `SqlError`: a lost
 * connection, a serialization failure, a deadlock), so a key is back within seconds of the database, however long
 * the outage, instead of waiting out a backoff grown for a reconciler's own failures.
 *
 * @example
 * ```ts
 * failureDelayMs(12, sqlErrorConnectionLost, DEFAULT_BACKOFF); // TRANSIENT_BACKOFF_MAX_MS, not 5 minutes
 * ```
 */
export const TRANSIENT_BACKOFF_MAX_MS = 5_000;

/**
 * The backoff after `attempts` consecutive failures that ended with `error`: {@link backoffDelayMs}, capped at
 * {@link TRANSIENT_BACKOFF_MAX_MS} when the error is the database's and retryable.
 *
 * @example
 * ```ts
 * failureDelayMs(3, new ComputeError('TIMEOUT', 'no answer'), DEFAULT_BACKOFF); // 4000
 * ```
 */
export function failureDelayMs(attempts: number, error: unknown, backoff: Required<BackoffOptions>): number {
  const delay = backoffDelayMs(attempts, backoff);
  return isSqlError(error) && error.retryable ? Math.min(delay, TRANSIENT_BACKOFF_MAX_MS) : delay;
}

const MAX_ERROR_TEXT = 1_000;

/**
 * What is stored in `work_items.last_error` and logged for a reconciler failure. A ComputeError's code and message
 * are kept (they are written for operators); a database error keeps only its classified reason, and anything else a
 * generic text, because its message may carry a secret or an internal detail.
 *
 * @example
 * ```ts
 * describeFailure(new ComputeError('TIMEOUT', 'no answer from the BMC')); // 'TIMEOUT: no answer from the BMC'
 * describeFailure(new Error('password=hunter2')); // 'reconciler failed with an unclassified error'
 * ```
 */
export function describeFailure(err: unknown): string {
  if (isComputeError(err)) return `${err.code}: ${err.message}`.slice(0, MAX_ERROR_TEXT);
  if (isSqlError(err)) return `database error (${err.reason})`;
  return 'reconciler failed with an unclassified error';
}
