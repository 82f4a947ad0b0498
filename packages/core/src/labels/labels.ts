import { ComputeError, type ErrorPath } from '../errors';
import { storableTextProblem } from '../json/storable-text';

/**
 * Node labels: a flat map of label key to string value.
 *
 * @example
 * ```ts
 * const labels: Labels = { 'gpu.model': 'H100', nvswitch: 'true' };
 * ```
 */
export type Labels = Readonly<Record<string, string>>;

/**
 * A label key: 1 to 63 characters of lower-case letters, digits, `.`, `_`, `/` and `-`, starting with a letter or a
 * digit (`gpu.model`, `nvswitch`, `mig.capable`, `acme.io/rack`).
 *
 * @example
 * ```ts
 * LABEL_KEY_PATTERN.test('gpu.model'); // true
 * ```
 */
export const LABEL_KEY_PATTERN = /^[a-z0-9][a-z0-9._/-]{0,62}$/;

/**
 * The longest label value, in UTF-16 code units.
 *
 * @example
 * ```ts
 * labelValueProblem('x'.repeat(MAX_LABEL_VALUE_LENGTH)); // undefined
 * ```
 */
export const MAX_LABEL_VALUE_LENGTH = 256;

/**
 * The most labels one map may hold.
 *
 * @example
 * ```ts
 * Object.keys(labels).length <= MAX_LABELS;
 * ```
 */
export const MAX_LABELS = 256;

// C0 controls, DEL and C1 controls: invisible, and they break logs and terminals.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point.
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;

/** The codes a label check may throw: definitions default to INVALID_CONFIG, API input uses INVALID_INPUT. */
export type LabelErrorCode = 'INVALID_CONFIG' | 'INVALID_INPUT';

/**
 * Whether a string is a valid label key (see {@link LABEL_KEY_PATTERN}).
 *
 * @example
 * ```ts
 * isLabelKey('gpu.model'); // true
 * isLabelKey('GPU Model'); // false
 * ```
 */
export function isLabelKey(key: unknown): key is string {
  return typeof key === 'string' && LABEL_KEY_PATTERN.test(key);
}

/**
 * Why a label value is invalid, or undefined when it is valid: a string of at most {@link MAX_LABEL_VALUE_LENGTH}
 * characters without control characters or lone surrogates (the empty string is allowed).
 *
 * @example
 * ```ts
 * labelValueProblem('H100'); // undefined
 * labelValueProblem('a\nb'); // 'a label value must not contain control characters'
 * ```
 */
export function labelValueProblem(value: unknown): string | undefined {
  if (typeof value !== 'string') return 'a label value must be a string';
  if (value.length > MAX_LABEL_VALUE_LENGTH)
    return `a label value must be at most ${MAX_LABEL_VALUE_LENGTH} characters`;
  if (CONTROL_CHARACTER.test(value)) return 'a label value must not contain control characters';
  // Labels live in a jsonb column, which refuses a lone surrogate.
  const problem = storableTextProblem(value);
  return problem === undefined ? undefined : `a label value ${problem}`;
}

/**
 * Checks a label map and returns a frozen copy of it. A non-object, more than {@link MAX_LABELS} labels, an invalid key
 * or value is a ComputeError (INVALID_CONFIG unless `code` says INVALID_INPUT) whose `details.path` ends at the
 * offending key.
 *
 * @example
 * ```ts
 * validateLabels({ 'gpu.model': 'H100', nvswitch: 'true' }, ['labels']);
 * validateLabels({ 'Bad Key': 'x' }, ['labels']); // throws, details.path ['labels', 'Bad Key']
 * ```
 */
export function validateLabels(labels: unknown, path: ErrorPath = [], code: LabelErrorCode = 'INVALID_CONFIG'): Labels {
  const refuse = (message: string, at: ErrorPath): never => {
    throw new ComputeError(code, message, { details: { path: at } });
  };
  if (typeof labels !== 'object' || labels === null || Array.isArray(labels)) {
    return refuse('labels must be an object of string values', path);
  }
  const proto: unknown = Object.getPrototypeOf(labels);
  if (proto !== Object.prototype && proto !== null) return refuse('labels must be a plain object', path);
  const keys = Object.keys(labels);
  if (keys.length > MAX_LABELS) return refuse(`at most ${MAX_LABELS} labels are allowed`, path);
  const copy: Record<string, string> = {};
  for (const key of keys) {
    if (!isLabelKey(key)) {
      refuse('a label key must be 1 to 63 of a-z, 0-9, ".", "_", "/", "-", starting with a letter or digit', [
        ...path,
        key,
      ]);
    }
    const value: unknown = (labels as Record<string, unknown>)[key];
    const problem = labelValueProblem(value);
    if (problem !== undefined) refuse(problem, [...path, key]);
    copy[key] = value as string;
  }
  return Object.freeze(copy);
}
