import { describe, expect, it } from 'vitest';
import { isComputeError } from '../src/errors';
import { assertJson, checkJson, deepFreeze, isJson, MAX_JSON_DEPTH } from '../src/json';
import { errorOf } from './support/errors';

function nested(depth: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < depth; i += 1) value = [value];
  return value;
}

class Point {
  x = 1;
}

const sparse = [1, 2, 3];
delete sparse[1];
const named = Object.assign([1], { extra: true });
const cyclic: Record<string, unknown> = { a: {} };
(cyclic.a as Record<string, unknown>).back = cyclic;
const withGetter = Object.defineProperty({}, 'now', { enumerable: true, get: () => 1 });

describe('checkJson', () => {
  it.each([
    null,
    true,
    0,
    -0,
    1.5,
    '',
    'ü 日本',
    [],
    {},
    { a: [1, 'two', null, { b: false }] },
    Object.assign(Object.create(null) as object, { a: 1 }),
    nested(MAX_JSON_DEPTH),
  ])('accepts %j', (value) => {
    expect(checkJson(value)).toBeUndefined();
    expect(isJson(value)).toBe(true);
  });

  it('accepts the same object reached twice without a cycle', () => {
    const shared = { n: 1 };
    expect(checkJson({ a: shared, b: [shared, shared] })).toBeUndefined();
  });

  it.each([
    ['undefined in an array', { with: { list: [1, 2, undefined] } }, ['with', 'list', 2]],
    ['undefined in an object', { a: { b: undefined } }, ['a', 'b']],
    ['undefined itself', undefined, []],
    ['a function', { f: () => 1 }, ['f']],
    ['a symbol', [Symbol('s')], [0]],
    ['a symbol key', { [Symbol('s')]: 1 }, []],
    ['a bigint', { n: 10n }, ['n']],
    ['a Date', { at: new Date(0) }, ['at']],
    ['NaN', [Number.NaN], [0]],
    ['Infinity', { x: Number.POSITIVE_INFINITY }, ['x']],
    ['-Infinity', { x: [0, Number.NEGATIVE_INFINITY] }, ['x', 1]],
    ['a class instance', { p: new Point() }, ['p']],
    ['a Map', { m: new Map() }, ['m']],
    ['a Set', { s: new Set([1]) }, ['s']],
    ['a typed array', { b: new Uint8Array(2) }, ['b']],
    ['an ArrayBuffer', { b: new ArrayBuffer(2) }, ['b']],
    ['a RegExp', { r: /x/ }, ['r']],
    ['a boxed string', { s: new String('x') }, ['s']],
    ['an array subclass', { l: new (class List extends Array {})() }, ['l']],
    ['a sparse array', { l: sparse }, ['l', 1]],
    ['an array with named properties', { l: named }, ['l']],
    ['a cycle', cyclic, ['a', 'back']],
    [
      'a self-containing array',
      (() => {
        const a: unknown[] = [];
        a.push(a);
        return a;
      })(),
      [0],
    ],
    ['a getter', { g: withGetter }, ['g', 'now']],
    ['a NUL character', { s: 'a\u0000b' }, ['s']],
    ['a lone surrogate', ['\ud800'], [0]],
    ['a lone surrogate in a key', { '\udc00': 1 }, ['\udc00']],
    ['nesting past the cap', { deep: nested(MAX_JSON_DEPTH) }, ['deep', ...Array(MAX_JSON_DEPTH - 1).fill(0)]],
  ])('refuses %s at its path', (_name, value, path) => {
    const issue = checkJson(value);
    expect(issue?.path).toEqual(path);
    expect(typeof issue?.message).toBe('string');
    expect(isJson(value)).toBe(false);
  });

  it('prefixes the base path', () => {
    expect(checkJson([1, undefined], ['steps', 2, 'with'])?.path).toEqual(['steps', 2, 'with', 1]);
  });

  it('refuses 100,000 levels of nesting with an issue, not a stack overflow', () => {
    const issue = checkJson(nested(100_000));
    expect(issue?.path).toHaveLength(MAX_JSON_DEPTH);
  });

  it('refuses a deep cycle through an object', () => {
    const root: Record<string, unknown> = {};
    let cursor = root;
    for (let i = 0; i < 10; i += 1) {
      cursor.next = {};
      cursor = cursor.next as Record<string, unknown>;
    }
    cursor.next = root;
    expect(checkJson(root)?.message).toMatch(/cycle/);
  });
});

describe('assertJson', () => {
  it('throws INVALID_CONFIG by default with details.path at the offending element', () => {
    const error = errorOf(() => assertJson({ list: [1, 2, () => 3] }, ['with']));
    expect(isComputeError(error, 'INVALID_CONFIG')).toBe(true);
    expect((error as { details: { path: unknown } }).details.path).toEqual(['with', 'list', 2]);
  });

  it('throws the code the caller chose', () => {
    expect(
      isComputeError(
        errorOf(() => assertJson(new Date(), ['body'], 'INVALID_INPUT')),
        'INVALID_INPUT',
      ),
    ).toBe(true);
  });

  it('returns nothing for JSON', () => {
    expect(assertJson({ a: [null] })).toBeUndefined();
  });
});

describe('deepFreeze', () => {
  it('freezes every level and returns the same value', () => {
    const value = { units: [{ name: 'sysctl', settings: { a: [1] } }] };
    const frozen = deepFreeze(value);
    expect(frozen).toBe(value);
    expect(Object.isFrozen(value)).toBe(true);
    expect(Object.isFrozen(value.units)).toBe(true);
    expect(Object.isFrozen(value.units[0]?.settings.a)).toBe(true);
  });

  it('refuses a value that is not JSON, leaving it unfrozen', () => {
    const value = { ok: {}, bad: new Date() };
    expect(
      isComputeError(
        errorOf(() => deepFreeze(value, ['profile'])),
        'INVALID_CONFIG',
      ),
    ).toBe(true);
    expect(Object.isFrozen(value.ok)).toBe(false);
  });
});
