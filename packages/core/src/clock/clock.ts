/**
 * Where the kernel gets the time. Every timestamp the kernel writes or compares comes from a Clock, never from SQL's
 * `now()`, so a test can drive time with a fake clock and several processes agree on one source per process.
 *
 * @example
 * ```ts
 * const clock: Clock = { now: () => new Date('2026-01-01T00:00:00Z') };
 * ```
 */
export interface Clock {
  now(): Date;
}

/**
 * The wall clock.
 *
 * @example
 * ```ts
 * betterCompute({ database, clock: systemClock });
 * ```
 */
export const systemClock: Clock = Object.freeze({ now: () => new Date() });

/**
 * A Date `ms` milliseconds after `from`.
 *
 * @example
 * ```ts
 * const deadline = addMs(clock.now(), 30_000);
 * ```
 */
export function addMs(from: Date, ms: number): Date {
  return new Date(from.getTime() + ms);
}
