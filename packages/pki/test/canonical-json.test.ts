import { describe, expect, it } from 'vitest';
import { canonicalBytes, canonicalJson } from '../src';
import { computeErrorOf } from './support/errors';

describe('canonicalJson', () => {
  it('sorts keys at every depth and writes no whitespace', () => {
    expect(canonicalJson({ b: { z: 1, a: [2, { d: null, c: true }] }, a: 'x' })).toBe(
      '{"a":"x","b":{"a":[2,{"c":true,"d":null}],"z":1}}',
    );
  });

  it('writes numbers and strings as JSON.stringify does', () => {
    const value = { n: [1e21, 0.1, -0, 5e-7, 123456789012], s: 'é "q" \n \u2028 😀' };
    expect(canonicalJson(value)).toBe(
      `{"n":[${[1e21, 0.1, -0, 5e-7, 123456789012].map((n) => JSON.stringify(n)).join(',')}],"s":${JSON.stringify(value.s)}}`,
    );
  });

  it('gives the same bytes for the same value built in a different key order', () => {
    expect(canonicalBytes({ a: 1, b: 2 })).toEqual(canonicalBytes({ b: 2, a: 1 }));
  });

  it('encodes as UTF-8', () => {
    expect(Array.from(canonicalBytes('é'))).toEqual([0x22, 0xc3, 0xa9, 0x22]);
  });

  it.each([
    ['undefined', { a: { b: undefined } }, ['a', 'b']],
    ['a function', { f: () => 1 }, ['f']],
    ['a bigint', [1n], [0]],
    ['NaN', { x: [Number.NaN] }, ['x', 0]],
    ['Infinity', { x: Number.POSITIVE_INFINITY }, ['x']],
    ['a Date', { at: new Date(0) }, ['at']],
    ['a Map', { m: new Map() }, ['m']],
    ['a symbol', { s: Symbol('s') }, ['s']],
  ])('refuses %s with INVALID_INPUT at its path', async (_name, value, path) => {
    const error = await computeErrorOf(() => canonicalJson(value), 'INVALID_INPUT');
    expect(error.details.path).toEqual(path);
  });

  it('refuses a cycle but accepts the same object twice side by side', async () => {
    const shared = { x: 1 };
    expect(canonicalJson({ a: shared, b: shared })).toBe('{"a":{"x":1},"b":{"x":1}}');
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const error = await computeErrorOf(() => canonicalJson(cyclic), 'INVALID_INPUT');
    expect(error.details.path).toEqual(['self']);
  });

  it('refuses holes in arrays', async () => {
    const holey: unknown[] = [1];
    holey[2] = 3; // index 1 stays a hole
    const error = await computeErrorOf(() => canonicalJson(holey), 'INVALID_INPUT');
    expect(error.details.path).toEqual([1]);
  });
});
