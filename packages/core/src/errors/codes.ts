/**
 * The closed list of error codes every better-compute API, step and kernel function uses.
 *
 * @example
 * ```ts
 * import { COMPUTE_ERROR_CODES } from 'better-compute/core';
 * COMPUTE_ERROR_CODES.includes('NOT_FOUND'); // true
 * ```
 */
export const COMPUTE_ERROR_CODES = [
  'INVALID_CONFIG',
  'INVALID_INPUT',
  'INVALID_STATE',
  'NOT_FOUND',
  'CONFLICT',
  'UNAUTHENTICATED',
  'PERMISSION_DENIED',
  'TIMEOUT',
  'REJOIN_TIMEOUT',
  'NO_SITE_AGENT',
  'COMMAND_FAILED',
  'COMMAND_REJECTED',
  'COMMAND_EXPIRED',
  'COMMAND_CANCELLED',
  'DRIVER_ERROR',
  'INTERNAL',
] as const;

/** One of {@link COMPUTE_ERROR_CODES}. */
export type ComputeErrorCode = (typeof COMPUTE_ERROR_CODES)[number];

/**
 * Whether a value is one of the closed error codes.
 *
 * @example
 * ```ts
 * isComputeErrorCode('TIMEOUT'); // true
 * isComputeErrorCode('OOPS'); // false
 * ```
 */
export function isComputeErrorCode(value: unknown): value is ComputeErrorCode {
  return typeof value === 'string' && (COMPUTE_ERROR_CODES as readonly string[]).includes(value);
}
