import { ComputeError, type ErrorPath } from '../errors';
import { storableTextProblem } from './storable-text';
import type { Json } from './types';

/**
 * How deeply arrays and objects may nest in a JSON value; deeper input is refused instead of recursing on.
 *
 * @example
 * ```ts
 * checkJson(JSON.parse('['.repeat(65) + ']'.repeat(65)))?.message; // 'nested deeper than 64 levels'
 * ```
 */
export const MAX_JSON_DEPTH = 64;

/** The codes a JSON check may throw: definitions default to INVALID_CONFIG, API input uses INVALID_INPUT. */
export type JsonErrorCode = 'INVALID_CONFIG' | 'INVALID_INPUT';

/** What is wrong with a value that is not JSON, and where (relative to the checked value unless a base was given). */
export interface JsonIssue {
  path: ErrorPath;
  message: string;
}

function describeNonJson(value: unknown): string {
  if (value === undefined) return 'undefined is not a JSON value';
  if (typeof value === 'number') return `${String(value)} is not a JSON number (must be finite)`;
  if (typeof value === 'bigint') return 'a bigint is not a JSON value';
  if (typeof value === 'function') return 'a function is not a JSON value';
  if (typeof value === 'symbol') return 'a symbol is not a JSON value';
  if (value instanceof Date) return 'a Date is not a JSON value (use an ISO string)';
  if (value instanceof Map || value instanceof Set) return 'a Map or Set is not a JSON value';
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return 'binary data is not a JSON value';
  return 'only plain objects and arrays are JSON values (not class instances)';
}

function isPlainObjectPrototype(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

class JsonWalker {
  private readonly ancestors = new Set<object>();

  constructor(private readonly path: (string | number)[]) {}

  walk(value: unknown, depth: number): string | undefined {
    switch (typeof value) {
      case 'string':
        // A NUL or a lone surrogate cannot be stored in jsonb, so they are refused here rather than by PostgreSQL.
        return storableTextProblem(value);
      case 'boolean':
        return undefined;
      case 'number':
        return Number.isFinite(value) ? undefined : describeNonJson(value);
      case 'object':
        if (value === null) return undefined;
        return this.walkContainer(value, depth);
      default:
        return describeNonJson(value);
    }
  }

  private walkContainer(value: object, depth: number): string | undefined {
    if (this.ancestors.has(value)) return 'a cycle: the value contains itself';
    if (depth >= MAX_JSON_DEPTH) return `nested deeper than ${MAX_JSON_DEPTH} levels`;
    const plainArray = Array.isArray(value) && Object.getPrototypeOf(value) === Array.prototype;
    if (!plainArray && !(isPlainObjectPrototype(value) && !Array.isArray(value))) return describeNonJson(value);
    if (Object.getOwnPropertySymbols(value).length > 0) return 'symbol keys are not JSON';
    this.ancestors.add(value);
    const problem = plainArray ? this.walkArray(value as unknown[], depth) : this.walkObject(value, depth);
    this.ancestors.delete(value);
    return problem;
  }

  private walkArray(value: unknown[], depth: number): string | undefined {
    for (let index = 0; index < value.length; index += 1) {
      this.path.push(index);
      if (!Object.hasOwn(value, index)) return 'a hole in a sparse array is not JSON';
      const problem = this.walk(value[index], depth + 1);
      if (problem !== undefined) return problem;
      this.path.pop();
    }
    // Extra named properties on an array would silently vanish in JSON.stringify.
    if (Object.keys(value).length !== value.length) return 'an array with named properties is not JSON';
    return undefined;
  }

  private walkObject(value: object, depth: number): string | undefined {
    const descriptors = Object.getOwnPropertyDescriptors(value);
    for (const key of Object.keys(value)) {
      this.path.push(key);
      const keyProblem = storableTextProblem(key);
      if (keyProblem !== undefined) return `the key ${keyProblem}`;
      const descriptor = descriptors[key];
      // A getter may throw or answer differently each time; JSON data is plain data.
      if (descriptor === undefined || !('value' in descriptor)) return 'an accessor property is not JSON';
      const problem = this.walk(descriptor.value, depth + 1);
      if (problem !== undefined) return problem;
      this.path.pop();
    }
    return undefined;
  }
}

/**
 * Checks deeply that a value is plain JSON and returns the first problem, or undefined when it is. Refuses functions,
 * symbols, bigints, undefined, NaN and Infinity, Dates, Maps, Sets, typed arrays, class instances, sparse arrays,
 * accessors, cycles, NUL characters and lone surrogates, and nesting deeper than {@link MAX_JSON_DEPTH}.
 *
 * @example
 * ```ts
 * checkJson({ with: { list: [1, 2, undefined] } }); // { path: ['with', 'list', 2], message: 'undefined is not a JSON value' }
 * checkJson({ ok: [1, 'two', null] }); // undefined
 * ```
 */
export function checkJson(value: unknown, basePath: ErrorPath = []): JsonIssue | undefined {
  const path = [...basePath];
  const message = new JsonWalker(path).walk(value, 0);
  return message === undefined ? undefined : { path, message };
}

/**
 * Whether a value is plain JSON (see {@link checkJson}).
 *
 * @example
 * ```ts
 * isJson({ a: [1, null] }); // true
 * isJson({ at: new Date() }); // false
 * ```
 */
export function isJson(value: unknown): value is Json {
  return checkJson(value) === undefined;
}

/**
 * Throws a ComputeError (INVALID_CONFIG unless `code` says INVALID_INPUT) with `details.path` at the offending element
 * when a value is not plain JSON (see {@link checkJson}).
 *
 * @example
 * ```ts
 * assertJson(step.with, ['steps', 2, 'with']);
 * assertJson(body, ['body'], 'INVALID_INPUT');
 * ```
 */
export function assertJson(
  value: unknown,
  path: ErrorPath = [],
  code: JsonErrorCode = 'INVALID_CONFIG',
): asserts value is Json {
  const issue = checkJson(value, path);
  if (issue !== undefined) {
    throw new ComputeError(code, `not JSON: ${issue.message}`, { details: { path: issue.path } });
  }
}
