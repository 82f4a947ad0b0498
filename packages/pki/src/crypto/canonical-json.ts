import { ComputeError, type ErrorPath } from '@better-compute/core';

function refuse(path: ErrorPath, what: string): never {
  throw new ComputeError('INVALID_INPUT', `not canonical JSON: ${what}`, { details: { path, reason: 'not-json' } });
}

function write(value: unknown, path: (string | number)[], seen: Set<object>): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) refuse(path, 'a number that is not finite');
      return JSON.stringify(value);
    case 'object':
      break;
    default:
      refuse(path, `a value of type ${typeof value}`);
  }
  const object = value as object;
  if (seen.has(object)) refuse(path, 'a cycle');
  seen.add(object);
  let out: string;
  if (Array.isArray(object)) {
    const items: string[] = [];
    for (let i = 0; i < object.length; i += 1) {
      if (!(i in object)) refuse([...path, i], 'a hole in an array');
      items.push(write(object[i], [...path, i], seen));
    }
    out = `[${items.join(',')}]`;
  } else {
    const prototype = Object.getPrototypeOf(object);
    // Dates, Maps, class instances and the like have a JSON form only by convention; signing must not guess it.
    if (prototype !== Object.prototype && prototype !== null) refuse(path, 'an object that is not a plain object');
    const record = object as Record<string, unknown>;
    const keys = Object.keys(record).sort();
    out = `{${keys.map((key) => `${JSON.stringify(key)}:${write(record[key], [...path, key], seen)}`).join(',')}}`;
  }
  seen.delete(object);
  return out;
}

/**
 * The canonical JSON text of a value: object keys sorted by UTF-16 code units (JavaScript's default sort), no
 * whitespace, strings and numbers exactly as `JSON.stringify` writes them. Anything that is not plain JSON (undefined,
 * functions, symbols, bigints, NaN and infinities, Dates and other class instances, cycles, array holes) is refused
 * with INVALID_INPUT and `details.path` naming it.
 *
 * @example
 * ```ts
 * canonicalJson({ b: 1, a: [true, 'x'] }); // '{"a":[true,"x"],"b":1}'
 * ```
 */
export function canonicalJson(value: unknown): string {
  return write(value, [], new Set());
}

/**
 * The UTF-8 bytes of {@link canonicalJson}: what every better-compute signature is computed over.
 *
 * @example
 * ```ts
 * const bytes = canonicalBytes({ id: 'bat_01k…', nodeIds: ['node_01k…'] });
 * ```
 */
export function canonicalBytes(value: unknown): Uint8Array {
  return new TextEncoder().encode(canonicalJson(value));
}
