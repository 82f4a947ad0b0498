import { describe, expect, it } from 'vitest';
import { ComputeError } from '../src/errors';
import { SqlError } from '../src/sql';
import { DEFAULT_BACKOFF, failureDelayMs, TRANSIENT_BACKOFF_MAX_MS } from '../src/work';

const sqlError = (reason: 'connection-lost' | 'deadlock' | 'unique-violation') =>
  new SqlError('x', { reason, cause: undefined });

describe('the backoff after a failed pass', () => {
  it('doubles from the base up to the cap for a reconciler’s own failures', () => {
    const error = new ComputeError('TIMEOUT', 'no answer');
    expect([1, 2, 3, 20].map((n) => failureDelayMs(n, error, DEFAULT_BACKOFF))).toEqual([1_000, 2_000, 4_000, 300_000]);
  });

  it('stays within TRANSIENT_BACKOFF_MAX_MS when the database failed with a retryable error, however often', () => {
    for (const reason of ['connection-lost', 'deadlock'] as const) {
      expect(failureDelayMs(2, sqlError(reason), DEFAULT_BACKOFF)).toBe(2_000);
      expect(failureDelayMs(12, sqlError(reason), DEFAULT_BACKOFF)).toBe(TRANSIENT_BACKOFF_MAX_MS);
    }
  });

  it('grows as usual after a database error that is not retryable', () => {
    expect(failureDelayMs(12, sqlError('unique-violation'), DEFAULT_BACKOFF)).toBe(300_000);
  });
});
