/**
 * Why a database call failed, classified from its SQLSTATE so callers can retry what is safe to retry.
 */
export type SqlErrorReason =
  | 'serialization-failure'
  | 'deadlock'
  | 'connection-lost'
  | 'unique-violation'
  | 'foreign-key-violation'
  | 'not-null-violation'
  | 'check-violation'
  | 'exclusion-violation'
  | 'lock-not-available'
  | 'query-canceled'
  | 'invalid-input'
  | 'undefined-object'
  | 'syntax-error'
  | 'closed'
  | 'other';

const REASON_BY_SQLSTATE: Record<string, SqlErrorReason> = {
  '40001': 'serialization-failure',
  '40P01': 'deadlock',
  '23505': 'unique-violation',
  '23503': 'foreign-key-violation',
  '23502': 'not-null-violation',
  '23514': 'check-violation',
  '23P01': 'exclusion-violation',
  '55P03': 'lock-not-available',
  '57014': 'query-canceled',
  '57P01': 'connection-lost', // admin_shutdown
  '57P02': 'connection-lost', // crash_shutdown
  '57P03': 'connection-lost', // cannot_connect_now
  // The server ended the session for sitting idle (in a transaction, or at all): the connection is gone.
  '25P03': 'connection-lost', // idle_in_transaction_session_timeout
  '57P05': 'connection-lost', // idle_session_timeout
  // No connection could be had (the server is full): nothing ran, and a later attempt may find a free slot.
  '53300': 'connection-lost', // too_many_connections
  '22P02': 'invalid-input',
  '22007': 'invalid-input',
  '22008': 'invalid-input',
  '22003': 'invalid-input',
  '22023': 'invalid-input',
  '22P05': 'invalid-input',
  '42P01': 'undefined-object',
  '42703': 'undefined-object',
  '42883': 'undefined-object',
  '42601': 'syntax-error',
};

// Connection errors from the client libraries carry a Node error code rather than a SQLSTATE.
const CONNECTION_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
]);

const RETRYABLE: ReadonlySet<SqlErrorReason> = new Set(['serialization-failure', 'deadlock', 'connection-lost']);

/** Options of {@link SqlError}. */
export interface SqlErrorInit {
  reason: SqlErrorReason;
  sqlState?: string;
  constraint?: string;
  table?: string;
  cause: unknown;
}

/**
 * A database error with its SQLSTATE classified. `retryable` is true for serialization failures, deadlocks and lost
 * connections: running the whole transaction again is safe for those.
 *
 * @example
 * ```ts
 * try { await tx.query('INSERT …'); } catch (err) {
 *   if (isSqlError(err, 'unique-violation')) throw new ComputeError('CONFLICT', 'exists');
 *   throw err;
 * }
 * ```
 */
export class SqlError extends Error {
  override readonly name = 'SqlError';
  readonly reason: SqlErrorReason;
  readonly sqlState: string | undefined;
  readonly constraint: string | undefined;
  readonly table: string | undefined;
  readonly retryable: boolean;

  constructor(message: string, init: SqlErrorInit) {
    super(message, { cause: init.cause });
    this.reason = init.reason;
    this.sqlState = init.sqlState;
    this.constraint = init.constraint;
    this.table = init.table;
    this.retryable = RETRYABLE.has(init.reason);
  }
}

/**
 * Classifies a SQLSTATE (or a client's connection error code) into a {@link SqlErrorReason}.
 *
 * @example
 * ```ts
 * classifySqlState('40P01'); // 'deadlock'
 * ```
 */
export function classifySqlState(code: string | undefined): SqlErrorReason {
  if (!code) return 'other';
  if (CONNECTION_CODES.has(code)) return 'connection-lost';
  const known = REASON_BY_SQLSTATE[code];
  if (known) return known;
  if (code.startsWith('08')) return 'connection-lost';
  return 'other';
}

interface DriverErrorShape {
  code?: unknown;
  message?: unknown;
  constraint?: unknown;
  constraint_name?: unknown;
  table?: unknown;
  table_name?: unknown;
}

/**
 * Wraps whatever a driver threw into a {@link SqlError}; a SqlError passes through.
 *
 * @example
 * ```ts
 * catch (err) { throw toSqlError(err); }
 * ```
 */
export function toSqlError(err: unknown): SqlError {
  if (err instanceof SqlError) return err;
  const shape = (typeof err === 'object' && err !== null ? err : {}) as DriverErrorShape;
  const code = typeof shape.code === 'string' ? shape.code : undefined;
  const constraint = shape.constraint ?? shape.constraint_name;
  const table = shape.table ?? shape.table_name;
  const message = typeof shape.message === 'string' ? shape.message : String(err);
  return new SqlError(message, {
    reason: classifySqlState(code),
    ...(code && !CONNECTION_CODES.has(code) ? { sqlState: code } : {}),
    ...(typeof constraint === 'string' ? { constraint } : {}),
    ...(typeof table === 'string' ? { table } : {}),
    cause: err,
  });
}

/**
 * Whether a value is a {@link SqlError}, optionally of a given reason.
 *
 * @example
 * ```ts
 * isSqlError(err, 'serialization-failure');
 * ```
 */
export function isSqlError(value: unknown, reason?: SqlErrorReason): value is SqlError {
  return value instanceof SqlError && (reason === undefined || value.reason === reason);
}
