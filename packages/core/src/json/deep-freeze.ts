import type { ErrorPath } from '../errors';
import { assertJson, type JsonErrorCode } from './check-json';

/** A JSON value that cannot be changed, all the way down. */
export type DeepReadonly<T> = T extends (infer Item)[]
  ? readonly DeepReadonly<Item>[]
  : T extends object
    ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
    : T;

function freezeChecked(value: unknown): void {
  if (typeof value !== 'object' || value === null) return;
  Object.freeze(value);
  for (const child of Object.values(value)) freezeChecked(child);
}

/**
 * Freezes a JSON value in place, all the way down, and returns it. It checks the value first (see `assertJson`), so a
 * cycle, a class instance or too deep a nesting is a ComputeError instead of a silent partial freeze.
 *
 * @example
 * ```ts
 * const settings = deepFreeze({ units: [{ name: 'sysctl' }] });
 * Object.isFrozen(settings.units[0]); // true
 * ```
 */
export function deepFreeze<T>(value: T, path: ErrorPath = [], code: JsonErrorCode = 'INVALID_CONFIG'): DeepReadonly<T> {
  assertJson(value, path, code);
  freezeChecked(value);
  return value as DeepReadonly<T>;
}
