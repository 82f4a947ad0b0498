import { ComputeError, type ErrorPath } from '@better-compute/core';
import { assertStorableText } from '@better-compute/core/checks';

/**
 * Throws INVALID_INPUT at `path` unless `value` is a non-empty string of at most `max` characters that PostgreSQL can
 * store (no NUL, no lone surrogate: it ends up in a row or a query).
 */
export function requireString(value: unknown, path: ErrorPath, max = 256): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > max) {
    throw new ComputeError(
      'INVALID_INPUT',
      `${path.join('.')} must be a non-empty string of at most ${max} characters`,
      {
        details: { path },
      },
    );
  }
  assertStorableText(value, path);
  return value;
}

/** Like {@link requireString}, but undefined and null pass as undefined. */
export function optionalString(value: unknown, path: ErrorPath, max = 256): string | undefined {
  return value === undefined || value === null ? undefined : requireString(value, path, max);
}

/** Throws INVALID_INPUT at `path` unless `value` is an integer in `[min, max]`. */
export function requireInt(value: unknown, path: ErrorPath, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new ComputeError('INVALID_INPUT', `${path.join('.')} must be an integer from ${min} to ${max}`, {
      details: { path },
    });
  }
  return value;
}

/** Throws INVALID_INPUT at `path` unless `value` is a plain object. */
export function requireObject(value: unknown, path: ErrorPath): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ComputeError('INVALID_INPUT', `${path.join('.') || 'input'} must be an object`, { details: { path } });
  }
  return value as Record<string, unknown>;
}
