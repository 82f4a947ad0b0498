import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isComputeError } from '../src/errors';
import { evaluateWhen, parseWhen } from '../src/labels';

function outcome(source: string) {
  try {
    return { parsed: parseWhen(source, ['when']) };
  } catch (error) {
    return { error };
  }
}

function expectParseErrorInside(error: unknown, source: string) {
  expect(isComputeError(error, 'INVALID_CONFIG')).toBe(true);
  const { position, path } = (error as { details: { position: unknown; path: unknown } }).details;
  expect(path).toEqual(['when']);
  expect(typeof position).toBe('number');
  expect(Number.isInteger(position)).toBe(true);
  expect(position as number).toBeGreaterThanOrEqual(0);
  expect(position as number).toBeLessThanOrEqual(source.length);
}

// Strings built from the grammar's own pieces reach far more of the parser than random text would.
const piece = fc.constantFrom(
  'a',
  'gpu.model',
  'H100',
  '!',
  '=',
  '!=',
  '&&',
  '&',
  '|',
  '(',
  ')',
  ' ',
  '\t',
  'x-y/z',
  '.',
);
const grammarish = fc.array(piece, { maxLength: 12 }).map((pieces) => pieces.join(''));

describe('when: properties', () => {
  it('never throws anything but INVALID_CONFIG with a position inside the text, on arbitrary strings', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: 'binary', maxLength: 40 }), grammarish), (source) => {
        const result = outcome(source);
        if ('error' in result) expectParseErrorInside(result.error, source);
        else expect(result.parsed.source).toBe(source);
      }),
      { numRuns: 2000 },
    );
  });

  it('evaluates whatever it parses without throwing, and an expression with no terms is false', () => {
    const labels = fc.dictionary(fc.constantFrom('a', 'gpu.model', 'x-y/z'), fc.constantFrom('true', 'false', 'H100'));
    fc.assert(
      fc.property(grammarish, labels, (source, nodeLabels) => {
        const result = outcome(source);
        if ('error' in result) return;
        const value = evaluateWhen(result.parsed, nodeLabels);
        expect(typeof value).toBe('boolean');
        if (result.parsed.terms.length === 0) expect(value).toBe(false);
      }),
      { numRuns: 1000 },
    );
  });

  it('a conjunction holds exactly when each of its terms holds alone', () => {
    const term = fc.constantFrom('a', '!a', 'b=1', 'b!=1', 'c', 'c=2');
    const labels = fc.record(
      { a: fc.constantFrom('true', 'false'), b: fc.constantFrom('1', '2') },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(fc.array(term, { minLength: 1, maxLength: 4 }), labels, (terms, nodeLabels) => {
        const all = evaluateWhen(terms.join(' && '), nodeLabels);
        expect(all).toBe(terms.every((one) => evaluateWhen(one, nodeLabels)));
      }),
    );
  });
});
