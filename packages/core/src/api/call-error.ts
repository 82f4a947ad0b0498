import { ComputeError, type ComputeErrorCode, isComputeError, toComputeError } from '../errors';
import { SqlError, type SqlErrorReason } from '../sql/sql-error';

/**
 * What a failed API call answers: a ComputeError as it is; a database fault as the closed code that says what the
 * caller can do about it, never `INTERNAL` (an HTTP 500), with `details.retryable` and the database's reason; anything
 * else `INTERNAL` without its message (it may carry a secret or an internal detail).
 *
 * - a lost connection (or no free connection, or the server shutting down): `TIMEOUT` (504). Whether a write took
 *   effect is unknown, as behind a gateway that timed out; the caller reads the state again or retries.
 * - a serialization failure, a deadlock or a lock not available: `CONFLICT` (409). The call was rolled back whole and
 *   may be retried as it is.
 * - a statement cancelled (its `statement_timeout` ran out): `TIMEOUT`, not retryable as it is.
 *
 * @example
 * ```ts
 * try { return await handler(input); } catch (thrown) { throw apiCallError(thrown); }
 * ```
 */
export function apiCallError(thrown: unknown): ComputeError {
  if (isComputeError(thrown)) return thrown;
  const fault = databaseFault(thrown);
  const answer = fault && DATABASE_FAULT_ANSWERS[fault.reason];
  if (!answer) return toComputeError(thrown);
  return new ComputeError(answer.code, answer.message, {
    details: { retryable: answer.retryable, reason: answer.reason ?? `database-${fault.reason}` },
    cause: thrown,
  });
}

interface FaultAnswer {
  code: ComputeErrorCode;
  message: string;
  retryable: boolean;
  /** `details.reason`; default `database-<the SqlError's reason>`. */
  reason?: string;
}

const LOST: FaultAnswer = {
  code: 'TIMEOUT',
  message: 'the database connection failed during the call; it may have taken effect',
  retryable: true,
};
const ROLLED_BACK: FaultAnswer = {
  code: 'CONFLICT',
  message: 'the call met a concurrent change and was rolled back; retry it',
  retryable: true,
};

const DATABASE_FAULT_ANSWERS: Partial<Record<SqlErrorReason, FaultAnswer>> = {
  'connection-lost': LOST,
  closed: LOST,
  'serialization-failure': ROLLED_BACK,
  deadlock: ROLLED_BACK,
  'lock-not-available': ROLLED_BACK,
  'query-canceled': {
    code: 'TIMEOUT',
    message: 'a database statement of the call ran out of time',
    retryable: false,
    reason: 'database-statement-timeout',
  },
};

// A handler may wrap the driver's error (a ComputeError was handled above); one level of cause is looked at.
function databaseFault(thrown: unknown): SqlError | undefined {
  if (thrown instanceof SqlError) return thrown;
  const cause = thrown instanceof Error ? thrown.cause : undefined;
  return cause instanceof SqlError ? cause : undefined;
}
