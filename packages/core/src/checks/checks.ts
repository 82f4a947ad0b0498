import { ComputeError, type ErrorPath } from '../errors';
import { assertStorableText } from '../json/storable-text';

/**
 * Whether a value is an object made by `{}` or `Object.create(null)`: not an array, a class instance or a function.
 *
 * @example
 * ```ts
 * isPlainObject({ use: 'power.setPower' }); // true
 * isPlainObject(new Date()); // false
 * ```
 */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * Throws INVALID_CONFIG with `details.path`: a definition or an option is wrong.
 *
 * @example
 * ```ts
 * refuseConfig('retries must be a whole number from 0 to 100', ['retries']);
 * ```
 */
export function refuseConfig(message: string, path: ErrorPath): never {
  throw new ComputeError('INVALID_CONFIG', message, { details: { path } });
}

/**
 * Throws INVALID_INPUT with `details.path`: a caller's input is wrong.
 *
 * @example
 * ```ts
 * refuseInput('inventory.gpus must be an array', ['gpus']);
 * ```
 */
export function refuseInput(message: string, path: ErrorPath): never {
  throw new ComputeError('INVALID_INPUT', message, { details: { path } });
}

/** What {@link requireText} takes besides the value and its path. */
export interface RequireTextOptions {
  /** The longest text allowed. Default 512. */
  readonly max?: number;
  /** How the message names the value. Default: its path joined with `.`. */
  readonly name?: string;
}

/**
 * Returns `value` when it is a non-empty string of at most `max` characters that PostgreSQL can store; anything else
 * is INVALID_INPUT at `path` (`<name> must be a non-empty string of at most <max> characters`, or the storable-text
 * refusal).
 *
 * @example
 * ```ts
 * const nodeId = requireText(input.nodeId, ['nodeId']);
 * ```
 */
export function requireText(value: unknown, path: ErrorPath, options: RequireTextOptions = {}): string {
  const max = options.max ?? 512;
  if (typeof value !== 'string' || value.length === 0 || value.length > max) {
    const name = options.name ?? path.join('.');
    refuseInput(`${name} must be a non-empty string of at most ${max} characters`, path);
  }
  assertStorableText(value, path);
  return value;
}
