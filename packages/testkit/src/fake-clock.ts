import { type Clock, ComputeError } from '@better-compute/core';

/**
 * A {@link Clock} a test moves by hand. It never moves backwards: `advance` takes a non-negative number of
 * milliseconds, and `set` to an earlier time than now throws.
 *
 * @example
 * ```ts
 * const clock: FakeClock = createFakeClock('2026-03-01T00:00:00Z');
 * clock.advance(30_000);
 * clock.now().toISOString(); // '2026-03-01T00:00:30.000Z'
 * ```
 */
export interface FakeClock extends Clock {
  /** Moves the clock forward by `ms` (a finite number ≥ 0). */
  advance(ms: number): void;
  /** Moves the clock to `to`, which must not be earlier than now. */
  set(to: Date): void;
}

function invalid(path: string, message: string): ComputeError {
  return new ComputeError('INVALID_INPUT', message, { details: { path: [path] } });
}

function toMs(value: unknown, path: string): number {
  const ms =
    value instanceof Date ? value.getTime() : typeof value === 'string' ? new Date(value).getTime() : Number.NaN;
  if (Number.isNaN(ms)) throw invalid(path, `${path} must be a valid Date or ISO time`);
  return ms;
}

/**
 * Makes a {@link FakeClock} standing at `start` (default `2026-03-01T00:00:00Z`). `now()` returns a fresh Date each
 * call, so a caller mutating it cannot move the clock. Pass the same clock to `betterCompute({ clock })` and to
 * `settle()`.
 *
 * @example
 * ```ts
 * const clock = createFakeClock();
 * const compute = await betterCompute({ database, clock, modules });
 * clock.advance(60_000);
 * clock.set(new Date('2026-03-02T00:00:00Z'));
 * clock.set(new Date('2026-03-01T00:00:00Z')); // throws: the clock never moves backwards
 * ```
 */
export function createFakeClock(start: Date | string = '2026-03-01T00:00:00Z'): FakeClock {
  let now = toMs(start, 'start');
  return {
    now: () => new Date(now),
    advance(ms: number): void {
      if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
        throw invalid('ms', 'a fake clock advances by a finite number of milliseconds ≥ 0');
      }
      now += ms;
    },
    set(to: Date): void {
      const target = toMs(to, 'to');
      if (target < now) {
        const [asked, current] = [new Date(target).toISOString(), new Date(now).toISOString()];
        throw invalid('to', `a fake clock never moves backwards: ${asked} is before ${current}`);
      }
      now = target;
    },
  };
}
