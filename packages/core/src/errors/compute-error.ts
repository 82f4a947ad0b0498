import type { ComputeErrorCode } from './codes';
import { isComputeErrorCode } from './codes';
import type { ErrorReason } from './reasons';

/** A path to the offending field, e.g. `['steps', 2, 'with', 'port']`. */
export type ErrorPath = readonly (string | number)[];

/**
 * Structured details of an error. `path` names the offending field; `reason` a machine-readable cause, one of the
 * code's {@link ERROR_REASONS} for better-compute's own errors.
 */
export interface ComputeErrorDetails {
  path?: ErrorPath;
  reason?: string;
  issues?: readonly ComputeErrorIssue[];
  [key: string]: unknown;
}

/**
 * The reason `R` as an error of code `C` may carry it: a reason of {@link ERROR_REASONS} only under its own code (a
 * table reason under another code is a type error); a reason the table does not know (a plugin's own, or a string
 * passed on) as it is.
 */
export type CheckedErrorReason<C extends ComputeErrorCode, R extends string> = R extends ErrorReason
  ? R extends ErrorReason<C>
    ? R
    : ErrorReason<C>
  : R;

/** One problem of many, as INVALID_INPUT lists them when several things are wrong at once. */
export interface ComputeErrorIssue {
  path: ErrorPath;
  message: string;
  code?: ComputeErrorCode;
}

/** Options of {@link ComputeError}. */
export interface ComputeErrorOptions<C extends ComputeErrorCode = ComputeErrorCode, R extends string = string> {
  details?: ComputeErrorDetails & { reason?: CheckedErrorReason<C, R> };
  cause?: unknown;
}

/**
 * The one error class of better-compute: a code from the closed list, a message, optional details (with `path`) and the
 * original `cause`.
 *
 * @example
 * ```ts
 * throw new ComputeError('INVALID_CONFIG', 'timeout must be positive', { details: { path: ['timeout'] } });
 * throw new ComputeError('INVALID_STATE', 'the lease moved on', { details: { reason: 'fenced' } }); // checked
 * ```
 */
export class ComputeError<C extends ComputeErrorCode = ComputeErrorCode, R extends string = string> extends Error {
  override readonly name = 'ComputeError';
  readonly code: ComputeErrorCode;
  readonly details: ComputeErrorDetails;

  constructor(code: C, message: string, options: ComputeErrorOptions<C, R> = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options.details ?? {};
  }

  /** The body of an HTTP error response: `{ code, message, details }`. */
  toJSON(): { code: ComputeErrorCode; message: string; details: ComputeErrorDetails } {
    return { code: this.code, message: this.message, details: this.details };
  }
}

/**
 * Whether a value is a {@link ComputeError}, optionally with a given code. Works across copies of the package.
 *
 * @example
 * ```ts
 * if (isComputeError(err, 'NOT_FOUND')) return undefined;
 * ```
 */
export function isComputeError(value: unknown, code?: ComputeErrorCode): value is ComputeError {
  if (!(value instanceof Error)) return false;
  const candidate = value as Partial<ComputeError>;
  const shaped = value instanceof ComputeError || (value.name === 'ComputeError' && isComputeErrorCode(candidate.code));
  return shaped && (code === undefined || candidate.code === code);
}

/**
 * Turns anything thrown into a {@link ComputeError}: a ComputeError passes through, anything else becomes `INTERNAL`
 * (or `fallback`) with the original kept as `cause`. The message of an unknown throw is not copied, because it may
 * carry a secret or an internal detail.
 *
 * @example
 * ```ts
 * try { await run(); } catch (err) { throw toComputeError(err); }
 * ```
 */
export function toComputeError(
  value: unknown,
  fallback: ComputeErrorCode = 'INTERNAL',
  message = 'internal error',
): ComputeError {
  if (isComputeError(value)) return value;
  return new ComputeError(fallback, message, { cause: value });
}
