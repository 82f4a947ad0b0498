import { describe, expect, it } from 'vitest';
import { isComputeError } from '../src/errors';
import { isLabelKey, labelValueProblem, MAX_LABELS, validateLabels } from '../src/labels';
import { errorOf } from './support/errors';

describe('labels', () => {
  it.each(['gpu.model', 'nvswitch', 'mig.capable', 'acme.io/rack', 'a', '0', 'under_score-dash', 'k'.repeat(63)])(
    'accepts the key %j',
    (key) => expect(isLabelKey(key)).toBe(true),
  );

  it.each(['', 'GPU', 'gpu model', '.a', '-a', '_a', '/a', 'a=b', 'a!', 'k'.repeat(64), 'ü'])(
    'refuses the key %j',
    (key) => expect(isLabelKey(key)).toBe(false),
  );

  it('returns a frozen copy of a valid map', () => {
    const input = { 'gpu.model': 'H100', nvswitch: 'true', empty: '' };
    const labels = validateLabels(input, ['labels']);
    expect(labels).toEqual(input);
    expect(labels).not.toBe(input);
    expect(Object.isFrozen(labels)).toBe(true);
  });

  it('accepts a null-prototype map', () => {
    const input = Object.assign(Object.create(null) as Record<string, string>, { a: 'b' });
    expect(validateLabels(input)).toEqual({ a: 'b' });
  });

  it.each([
    [{ 'Bad Key': 'x' }, ['labels', 'Bad Key']],
    [{ ok: 'x', n: 5 }, ['labels', 'n']],
    [{ ok: 'line\nbreak' }, ['labels', 'ok']],
    [{ ok: 'bell\u0007' }, ['labels', 'ok']],
    [{ ok: 'c1\u0085' }, ['labels', 'ok']],
    [{ ok: 'v'.repeat(257) }, ['labels', 'ok']],
    [{ ok: 'lone \ud800 surrogate' }, ['labels', 'ok']],
    [{ ok: 'lone \udc00 low surrogate' }, ['labels', 'ok']],
    [['a'], ['labels']],
    [null, ['labels']],
    ['a=b', ['labels']],
    [new Map([['a', 'b']]), ['labels']],
  ])('refuses %j with INVALID_CONFIG at %j', (labels, path) => {
    const error = errorOf(() => validateLabels(labels, ['labels']));
    expect(isComputeError(error, 'INVALID_CONFIG')).toBe(true);
    expect((error as { details: { path: unknown } }).details.path).toEqual(path);
  });

  it('uses INVALID_INPUT when the caller says so', () => {
    const error = errorOf(() => validateLabels({ A: 'b' }, ['labels'], 'INVALID_INPUT'));
    expect(isComputeError(error, 'INVALID_INPUT')).toBe(true);
  });

  it('refuses more than the most labels allowed', () => {
    const many = Object.fromEntries(Array.from({ length: MAX_LABELS + 1 }, (_, i) => [`k${i}`, 'v']));
    expect(
      isComputeError(
        errorOf(() => validateLabels(many)),
        'INVALID_CONFIG',
      ),
    ).toBe(true);
    delete many[`k${MAX_LABELS}`];
    expect(Object.keys(validateLabels(many))).toHaveLength(MAX_LABELS);
  });

  it('allows a 256-character value with spaces and unicode, not 257', () => {
    expect(labelValueProblem(`H100 SXM ü${'v'.repeat(246)}`)).toBeUndefined();
    expect(labelValueProblem('v'.repeat(257))).toBeDefined();
  });
});
