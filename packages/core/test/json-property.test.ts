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
          // What it accepts survives a JSON round trip unchanged.
          expect(JSON.parse(JSON.stringify(value))).toEqual(value);
        },
      ),
      { numRuns: 1000 },
    );
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
