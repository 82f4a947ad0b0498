import { ComputeError } from '../errors';
import { checkJson } from '../json/check-json';

/** The most a parked item is postponed at once: a day. */
const MAX_PARK_EVERY_MS = 86_400_000;

/** The longest `park.on` kept with an item, as JSON text. */
const MAX_PARK_ON_CHARS = 2_048;

/** A {@link WorkPark} as finishing stores it. */
export interface CheckedPark {
  /** `on` as JSON text. */
  on: string;
  everyMs: number;
  until: Date | undefined;
}

function refuse(message: string, path: string[]): ComputeError {
  return new ComputeError('INVALID_STATE', `a reconciler's park ${message}`, { details: { path: ['park', ...path] } });
}

/**
 * Checks what a reconciler returned as `park` (see `WorkPark`): `on` a JSON object of at most 2,048 characters,
 * `everyMs` a whole number of 1 ms to a day (default the requeue's delay, at least 1 ms), `until` a valid Date. A
 * reconciler that returns anything else failed its pass: INVALID_STATE at the field, as a bad `requeueAfterMs` is.
 *
 * @example
 * ```ts
 * const park = checkPark({ on: { commandId: 'cmd_1' }, everyMs: 10_000 }, 10_000); // { on: '{"commandId":"cmd_1"}', … }
 * ```
 */
export function checkPark(value: unknown, delayMs: number): CheckedPark | ComputeError {
  if (typeof value !== 'object' || value === null) return refuse('must be an object', []);
  const { on, everyMs, until } = value as { on?: unknown; everyMs?: unknown; until?: unknown };
  if (typeof on !== 'object' || on === null || Array.isArray(on)) return refuse('on must be a JSON object', ['on']);
  const problem = checkJson(on, ['park', 'on']);
  if (problem) return refuse(`on: ${problem.message}`, ['on']);
  const text = JSON.stringify(on);
  if (text.length > MAX_PARK_ON_CHARS) return refuse(`on must be at most ${MAX_PARK_ON_CHARS} characters`, ['on']);
  const every = everyMs ?? Math.max(1, Math.round(delayMs));
  if (typeof every !== 'number' || !Number.isInteger(every) || every < 1 || every > MAX_PARK_EVERY_MS) {
    return refuse('everyMs must be a whole number of milliseconds from 1 to 86,400,000', ['everyMs']);
  }
  if (until !== undefined && (!(until instanceof Date) || Number.isNaN(until.getTime()))) {
    return refuse('until must be a valid Date', ['until']);
  }
  return { on: text, everyMs: every, until };
}
