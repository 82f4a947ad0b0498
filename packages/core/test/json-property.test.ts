import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isComputeError } from '../src/errors';
import { assertJson, checkJson, deepFreeze, type Json } from '../src/json';

// The path leads through existing containers to an element that exists, or to a hole of a sparse array.
function pathLeadsIntoValue(root: unknown, path: readonly (string | number)[]): boolean {
  let cursor: unknown = root;
  for (const [index, key] of path.entries()) {
    if (typeof cursor !== 'object' || cursor === null) return false;
    const isHole = Array.isArray(cursor) && typeof key === 'number' && key < cursor.length;
    if (!(key in cursor) && !(isHole && index === path.length - 1)) return false;
    cursor = (cursor as Record<string | number, unknown>)[key];
  }
  return true;
}

// Deep equality where -0 equals 0, because JSON writes -0 as 0; everything else must survive exactly.
function sameJson(a: unknown, b: unknown): boolean {
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) return a === b;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const keysA = Object.keys(a);
  const keysB = Object.keys(b);
  if (keysA.length !== keysB.length) return false;
  return keysA.every(
    (key) =>
      Object.hasOwn(b, key) && sameJson((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key]),
  );
}

describe('assertJson: properties', () => {
  it('on anything, throws only INVALID_CONFIG whose path leads to an element that exists', () => {
    fc.assert(
      fc.property(
        fc.anything({
          withBigInt: true,
          withDate: true,
          withMap: true,
          withSet: true,
          withTypedArray: true,
          withSparseArray: true,
          withNullPrototype: true,
          withBoxedValues: true,
          withObjectString: true,
        }),
        (value) => {
          try {
            assertJson(value, ['with']);
          } catch (error) {
            expect(isComputeError(error, 'INVALID_CONFIG')).toBe(true);
            const path = (error as { details: { path: (string | number)[] } }).details.path;
            expect(path.slice(0, 1)).toEqual(['with']);
            expect(pathLeadsIntoValue(value, path.slice(1))).toBe(true);
            return;
          }
          // What it accepts survives a JSON round trip unchanged (but for the sign of zero).
          expect(sameJson(JSON.parse(JSON.stringify(value)), value)).toBe(true);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('accepts -0, which JSON writes as 0', () => {
    expect(checkJson({ x: -0 })).toBeUndefined();
    expect(sameJson(JSON.parse(JSON.stringify({ x: -0 })), { x: 0 })).toBe(true);
    expect(sameJson({ x: 1 }, { x: 2 })).toBe(false);
  });

  it('accepts every value made of JSON parts and deepFreeze freezes it whole', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(checkJson(value)).toBeUndefined();
        const frozen = deepFreeze(structuredClone(value) as Json);
        expect(frozen).toEqual(value);
        if (typeof frozen === 'object' && frozen !== null) expect(Object.isFrozen(frozen)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });
});
