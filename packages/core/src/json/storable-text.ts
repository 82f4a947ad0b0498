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
  // Callers check the type first; this keeps a mistaken call a refusal instead of a TypeError.
  if (typeof value !== 'string') return 'is not a string';
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

// Deeper input is left to the schema (and to checkJson, which refuses it); the walk only has to be bounded.
const MAX_TEXT_WALK_DEPTH = 64;

function walkText(value: unknown, path: (string | number)[], depth: number): string | undefined {
  if (typeof value === 'string') return storableTextProblem(value);
  if (typeof value !== 'object' || value === null || depth >= MAX_TEXT_WALK_DEPTH) return undefined;
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index += 1) {
      path.push(index);
      const problem = walkText(value[index], path, depth + 1);
      if (problem !== undefined) return problem;
      path.pop();
    }
    return undefined;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  // Only plain data is walked: a Date or a class instance is the schema's to judge, and reading it could run code.
  if (proto !== Object.prototype && proto !== null) return undefined;
  for (const [key, item] of Object.entries(value)) {
    path.push(key);
    const keyProblem = storableTextProblem(key);
    if (keyProblem !== undefined) return `the key ${keyProblem}`;
    const problem = walkText(item, path, depth + 1);
    if (problem !== undefined) return problem;
    path.pop();
  }
  return undefined;
}

/**
 * The first string or object key in plain data (objects and arrays, walked up to 64 levels deep) that PostgreSQL
 * cannot store (see {@link storableTextProblem}), as `{ path, message }`, or undefined. Unlike {@link checkJson} it
 * accepts anything else (`undefined`, Dates, …): it is the check for input that a schema judges afterwards.
 *
 * @example
 * ```ts
 * findUnstorableText({ steps: [{ name: 'a\u0000' }] }); // { path: ['steps', 0, 'name'], message: 'contains a NUL …' }
 * findUnstorableText({ at: new Date(), note: undefined }); // undefined
 * ```
 */
export function findUnstorableText(
  value: unknown,
  basePath: ErrorPath = [],
): { path: ErrorPath; message: string } | undefined {
  const path = [...basePath];
  const message = walkText(value, path, 0);
  return message === undefined ? undefined : { path, message };
}
