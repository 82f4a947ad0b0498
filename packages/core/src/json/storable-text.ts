import { ComputeError, type ErrorPath } from '../errors';

// A lone surrogate is not valid Unicode: jsonb refuses it, and a text column would silently store U+FFFD instead.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Why PostgreSQL cannot store a string as it is, or undefined when it can: a NUL character (no text or jsonb value
 * may hold one) or a lone UTF-16 surrogate (not valid Unicode). Every id and text the kernel stores or looks up is
 * checked with this first, so such input is refused as the caller's mistake instead of failing in the database.
 *
 * @example
 * ```ts
 * storableTextProblem('acme'); // undefined
 * storableTextProblem('a\u0000b'); // 'contains a NUL character, which PostgreSQL cannot store'
 * ```
 */
export function storableTextProblem(value: string): string | undefined {
  if (value.includes('\u0000')) return 'contains a NUL character, which PostgreSQL cannot store';
  if (LONE_SURROGATE.test(value)) return 'contains a lone UTF-16 surrogate, which is not valid Unicode';
  return undefined;
}

/**
 * Throws a ComputeError (INVALID_INPUT unless `code` says INVALID_CONFIG) at `path` when a string cannot be stored
 * (see {@link storableTextProblem}). The message names the field, never the value, which may be a secret.
 *
 * @example
 * ```ts
 * assertStorableText(input.nodeId, ['nodeId']); // 'a\u0000b' throws INVALID_INPUT, details.path ['nodeId']
 * ```
 */
export function assertStorableText(
  value: string,
  path: ErrorPath,
  code: 'INVALID_INPUT' | 'INVALID_CONFIG' = 'INVALID_INPUT',
): void {
  const problem = storableTextProblem(value);
  if (problem === undefined) return;
  const name = path.length === 0 ? 'the text' : path.join('.');
  throw new ComputeError(code, `${name} ${problem}`, { details: { path } });
}
