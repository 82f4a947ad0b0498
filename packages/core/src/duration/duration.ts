import { refuseConfig } from '../checks/checks';
import type { ErrorPath } from '../errors';

/**
 * A duration as written in definitions: `'30s'`, `'10m'`, `'1h30m'`, … or a number of milliseconds.
 *
 * @example
 * ```ts
 * const timeout: Duration = '10m';
 * ```
 */
export type Duration = string | number;

/**
 * The longest duration accepted: 30 days, in milliseconds.
 *
 * @example
 * ```ts
 * parseDuration('30d') === MAX_DURATION_MS; // true
 * ```
 */
export const MAX_DURATION_MS = 30 * 24 * 60 * 60 * 1000;

const UNIT_MS = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1000, ms: 1 } as const;
type Unit = keyof typeof UNIT_MS;
const UNITS_LARGEST_FIRST = ['d', 'h', 'm', 's', 'ms'] as const satisfies readonly Unit[];

/**
 * The string form of a duration: one or more `<digits><unit>` parts, units `d`, `h`, `m`, `s`, `ms`, each at most
 * once and largest first, with no spaces (`'1h30m'`, `'2d'`, `'500ms'`).
 *
 * @example
 * ```ts
 * DURATION_PATTERN.test('1h30m'); // true
 * DURATION_PATTERN.test('30m1h'); // false
 * ```
 */
export const DURATION_PATTERN = /^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?$/;

function checkRange(ms: number, path: ErrorPath): number {
  if (!Number.isFinite(ms) || ms > MAX_DURATION_MS) refuseConfig('duration must be at most 30 days (30d)', path);
  if (ms <= 0) refuseConfig('duration must be positive', path);
  return ms;
}

/**
 * Reads a duration: `'30s'`, `'10m'`, `'1h'`, `'500ms'`, `'2d'`, compound `'1h30m'`, or a positive integer number of
 * milliseconds; returns milliseconds. Anything else, zero, or more than {@link MAX_DURATION_MS} (30 days) is
 * INVALID_CONFIG with `details.path`.
 *
 * @example
 * ```ts
 * parseDuration('1h30m'); // 5_400_000
 * parseDuration(2500); // 2500
 * parseDuration('5x', ['steps', 0, 'timeout']); // throws INVALID_CONFIG, details.path ['steps', 0, 'timeout']
 * ```
 */
export function parseDuration(value: unknown, path: ErrorPath = []): number {
  if (typeof value === 'number') {
    if (!Number.isInteger(value)) {
      if (Number.isFinite(value)) refuseConfig('a duration in milliseconds must be a whole number', path);
      refuseConfig('duration must be a finite number of milliseconds', path);
    }
    return checkRange(value, path);
  }
  if (typeof value !== 'string') {
    refuseConfig("duration must be a string such as '30s', '10m', '1h' or a number of milliseconds", path);
  }
  const match = value.length > 0 && value.length <= 64 ? DURATION_PATTERN.exec(value) : null;
  if (match === null) {
    refuseConfig("duration must look like '500ms', '30s', '10m', '1h', '2d' or '1h30m' (units largest first)", path);
  }
  let ms = 0;
  UNITS_LARGEST_FIRST.forEach((unit, index) => {
    const digits = match[index + 1];
    if (digits !== undefined) ms += Number(digits) * UNIT_MS[unit];
  });
  return checkRange(ms, path);
}

/**
 * Whether a value is a valid duration for {@link parseDuration}.
 *
 * @example
 * ```ts
 * isDuration('10m'); // true
 * isDuration('10 minutes'); // false
 * ```
 */
export function isDuration(value: unknown): value is Duration {
  try {
    parseDuration(value);
    return true;
  } catch {
    return false;
  }
}

/**
 * Formats milliseconds for display in the same compact form {@link parseDuration} reads (`'1h30m'`, `'2s500ms'`), so
 * `parseDuration(formatDuration(ms)) === ms` for every valid duration. Zero is `'0ms'`; a negative value gets a `-`;
 * fractions of a millisecond are rounded; a non-finite value is printed as is.
 *
 * @example
 * ```ts
 * formatDuration(5_400_000); // '1h30m'
 * formatDuration(1500); // '1s500ms'
 * ```
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  let rest = Math.round(Math.abs(ms));
  if (rest === 0) return '0ms';
  let out = '';
  for (const unit of UNITS_LARGEST_FIRST) {
    const count = Math.floor(rest / UNIT_MS[unit]);
    if (count > 0) {
      out += `${count}${unit}`;
      rest -= count * UNIT_MS[unit];
    }
  }
  return ms < 0 ? `-${out}` : out;
}
