import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatDuration, isDuration, MAX_DURATION_MS, parseDuration } from '../src/duration';
import { isComputeError } from '../src/errors';
import { errorOf } from './support/errors';

describe('parseDuration', () => {
  it.each([
    ['30s', 30_000],
    ['10m', 600_000],
    ['1h', 3_600_000],
    ['500ms', 500],
    ['2d', 172_800_000],
    ['1h30m', 5_400_000],
    ['1d2h3m4s5ms', 93_784_005],
    ['1m30s', 90_000],
    ['30d', MAX_DURATION_MS],
    ['0h5m', 300_000],
    [1, 1],
    [2500, 2500],
    [MAX_DURATION_MS, MAX_DURATION_MS],
  ])('reads %j as %i ms', (value, ms) => {
    expect(parseDuration(value)).toBe(ms);
    expect(isDuration(value)).toBe(true);
  });

  it.each([
    '',
    '30',
    '30 s',
    ' 30s',
    '1.5h',
    '-5s',
    '0s',
    '0ms',
    '30m1h',
    '1h1h',
    '5x',
    '1H',
    'ms',
    '31d',
    '720h1ms',
    `${'9'.repeat(400)}ms`,
    0,
    -1,
    1.5,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    MAX_DURATION_MS + 1,
    null,
    undefined,
    true,
    {},
    ['30s'],
    10n,
  ])('refuses %s with INVALID_CONFIG at the given path', (value) => {
    const error = errorOf(() => parseDuration(value, ['steps', 0, 'timeout']));
    expect(isComputeError(error, 'INVALID_CONFIG')).toBe(true);
    expect((error as { details: { path: unknown } }).details.path).toEqual(['steps', 0, 'timeout']);
    expect(isDuration(value)).toBe(false);
  });

  it('never throws anything but INVALID_CONFIG, and returns a positive whole number within the cap', () => {
    const value = fc.oneof(
      fc.anything(),
      fc.string(),
      fc.stringMatching(/^(\d{1,4}(d|h|m|s|ms)){1,4}$/),
      fc.double(),
      fc.integer(),
    );
    fc.assert(
      fc.property(value, (input) => {
        let ms: number;
        try {
          ms = parseDuration(input, ['timeout']);
        } catch (error) {
          expect(isComputeError(error, 'INVALID_CONFIG')).toBe(true);
          expect((error as { details: { path: unknown } }).details.path).toEqual(['timeout']);
          return;
        }
        expect(Number.isSafeInteger(ms)).toBe(true);
        expect(ms).toBeGreaterThan(0);
        expect(ms).toBeLessThanOrEqual(MAX_DURATION_MS);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('formatDuration', () => {
  it.each([
    [5_400_000, '1h30m'],
    [1500, '1s500ms'],
    [30_000, '30s'],
    [172_800_000, '2d'],
    [0, '0ms'],
    [-90_000, '-1m30s'],
    [Number.POSITIVE_INFINITY, 'Infinity'],
  ])('formats %d as %j', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it('is read back by parseDuration to the same milliseconds', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: MAX_DURATION_MS }), (ms) => {
        expect(parseDuration(formatDuration(ms))).toBe(ms);
      }),
    );
  });
});
