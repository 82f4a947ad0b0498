import type { ComputeErrorCode } from './codes';

/**
 * The HTTP status each error code maps to, in one table. Codes that describe a step's outcome (TIMEOUT, COMMAND_*, …)
 * surface over HTTP only when a call itself failed that way.
 *
 * @example
 * ```ts
 * HTTP_STATUS_BY_CODE.NOT_FOUND; // 404
 * ```
 */
export const HTTP_STATUS_BY_CODE: Readonly<Record<ComputeErrorCode, number>> = Object.freeze({
  INVALID_CONFIG: 400,
  INVALID_INPUT: 400,
  UNAUTHENTICATED: 401,
  PERMISSION_DENIED: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  INVALID_STATE: 409,
  TIMEOUT: 504,
  REJOIN_TIMEOUT: 504,
  NO_SITE_AGENT: 503,
  COMMAND_FAILED: 502,
  COMMAND_REJECTED: 502,
  COMMAND_EXPIRED: 504,
  COMMAND_CANCELLED: 409,
  DRIVER_ERROR: 502,
  INTERNAL: 500,
});

/**
 * The HTTP status for an error code.
 *
 * @example
 * ```ts
 * httpStatusForCode('CONFLICT'); // 409
 * ```
 */
export function httpStatusForCode(code: ComputeErrorCode): number {
  return HTTP_STATUS_BY_CODE[code];
}
