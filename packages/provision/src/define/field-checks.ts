import type { ErrorPath } from '@better-compute/core';
import { checkJson, isPlainObject, refuseConfig } from '@better-compute/core/checks';

/**
 * A plain object's own fields, as the checks read them.
 *
 * @example
 * ```ts
 * const fields: Fields = { use: 'power.setPower', on: 'site' };
 * ```
 */
export type Fields = Readonly<Record<string, unknown>>;

/**
 * Refuses the first own field not in `known` at `[...path, field]`. A field whose value is `undefined` counts as absent,
 * so `{ retries: cond ? 2 : undefined }` is fine.
 *
 * @example
 * ```ts
 * checkKnownFields({ use: 'a.b', colour: 'red' }, new Set(['use']), ['steps', 0]); // throws, path ['steps', 0, 'colour']
 * ```
 */
export function checkKnownFields(fields: Fields, known: ReadonlySet<string>, path: ErrorPath, what: string): void {
  for (const key of Object.keys(fields)) {
    if (fields[key] !== undefined && !known.has(key)) {
      refuseConfig(`unknown field ${quote(key)} in ${what}; the fields are ${[...known].join(', ')}`, [...path, key]);
    }
  }
}

/**
 * A value short enough to put in a message, quoted as JSON; a long or non-string value is described instead.
 *
 * @example
 * ```ts
 * quote('site'); // '"site"'
 * ```
 */
export function quote(value: unknown): string {
  if (typeof value === 'string') return value.length <= 64 ? JSON.stringify(value) : 'the string';
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return String(value);
  return Array.isArray(value) ? 'an array' : `a ${typeof value}`;
}

/**
 * What {@link checkString} enforces besides being a string.
 *
 * @example
 * ```ts
 * const role: StringRule = { min: 1, max: 64, pattern: /^[a-z][a-z0-9-]*$/, shape: 'like host' };
 * ```
 */
export interface StringRule {
  /** Default 0. */
  min?: number;
  max: number;
  pattern?: RegExp;
  /** What the value must look like, for the message (e.g. `dotted, like power.setPower`). */
  shape?: string;
}

/**
 * Checks a string field: its length, its pattern, and that it is storable JSON text (no NUL, no lone surrogate).
 *
 * @example
 * ```ts
 * checkString(step.name, ['steps', 0, 'name'], 'name', { min: 1, max: 256 });
 * ```
 */
export function checkString(value: unknown, path: ErrorPath, label: string, rule: StringRule): asserts value is string {
  const min = rule.min ?? 0;
  const length = min > 0 ? `${min} to ${rule.max}` : `at most ${rule.max}`;
  const shape = rule.shape === undefined ? '' : `, ${rule.shape}`;
  const expected = `${label} must be a string of ${length} characters${shape}`;
  if (typeof value !== 'string') refuseConfig(expected, path);
  if (value.length < min || value.length > rule.max) refuseConfig(expected, path);
  if (rule.pattern !== undefined && !rule.pattern.test(value)) refuseConfig(`${expected}, not ${quote(value)}`, path);
  const issue = checkJson(value, path);
  if (issue !== undefined) refuseConfig(`${label} ${issue.message}`, issue.path);
}

/**
 * Checks a whole number in a range.
 *
 * @example
 * ```ts
 * checkInteger(step.retries, ['retries'], 'retries', 0, 100);
 * ```
 */
export function checkInteger(value: unknown, path: ErrorPath, label: string, min: number, max: number): void {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    refuseConfig(`${label} must be a whole number from ${min} to ${max}`, path);
  }
}

/**
 * Checks that a value is one of a closed list of strings.
 *
 * @example
 * ```ts
 * checkOneOf(profile.target, ['metal', 'instance'], ['target'], 'target');
 * ```
 */
export function checkOneOf<T extends string>(
  value: unknown,
  allowed: readonly T[],
  path: ErrorPath,
  label: string,
): asserts value is T {
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
    refuseConfig(`${label} must be ${allowed.map((item) => `'${item}'`).join(', ')}, not ${quote(value)}`, path);
  }
}

/**
 * Checks a free-form JSON object (a step's `with`, a driver binding, a unit's settings): a plain object whose values
 * are JSON, refused at the offending element.
 *
 * @example
 * ```ts
 * checkJsonObject(step.with, ['steps', 2, 'with'], 'with'); // { port: NaN } throws, path ['steps', 2, 'with', 'port']
 * ```
 */
export function checkJsonObject(value: unknown, path: ErrorPath, label: string): void {
  if (!isPlainObject(value)) refuseConfig(`${label} must be a plain JSON object`, path);
  const issue = checkJson(value, path);
  if (issue !== undefined) refuseConfig(`${label} is not JSON: ${issue.message}`, issue.path);
}

/**
 * A validated JSON-shaped value copied, dropping fields whose value is `undefined` (absent, as the checks treat them).
 *
 * @example
 * ```ts
 * copyJson({ use: 'a.b', name: undefined }); // { use: 'a.b' }
 * ```
 */
export function copyJson<T>(value: T): T {
  // Only called after the checks, so there is no function, cycle or toJSON for stringify to trip on.
  return JSON.parse(JSON.stringify(value)) as T;
}
