import { randomFillSync } from 'node:crypto';
import { ComputeError } from '../errors';

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';
const PREFIX = /^[a-z][a-z0-9]{0,15}$/;
const RANDOM_BYTES = 10;

// Ids are made on every transition: random bytes are drawn a page at a time, and the encoding works on numbers (40 bits
// at a time fit a double exactly), so an id costs a few small strings and no BigInt or Buffer of its own.
const pool = new Uint8Array(4096 - (4096 % RANDOM_BYTES));
let poolOffset = pool.length;
let lastTime = -1;
const lastRandom = new Uint8Array(RANDOM_BYTES);

function drawRandom(into: Uint8Array): void {
  if (poolOffset + RANDOM_BYTES > pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  into.set(pool.subarray(poolOffset, poolOffset + RANDOM_BYTES));
  poolOffset += RANDOM_BYTES;
}

/** `count` base-32 digits of `value` (an integer below 2^53), most significant first. */
function base32(value: number, count: number): string {
  let out = '';
  let rest = value;
  for (let i = 0; i < count; i += 1) {
    out = CROCKFORD.charAt(rest % 32) + out;
    rest = Math.floor(rest / 32);
  }
  return out;
}

/** 40 bits (5 bytes from `at`) as a number. */
function fortyBits(bytes: Uint8Array, at: number): number {
  let value = 0;
  for (let i = at; i < at + 5; i += 1) value = value * 256 + (bytes[i] ?? 0);
  return value;
}

/**
 * The ULID of a time and 80 random bits: 10 base-32 digits of the milliseconds, then 16 of the bits, most significant
 * first. Exported for tests.
 */
export function encodeUlid(ms: number, random: Uint8Array): string {
  return base32(ms, 10) + base32(fortyBits(random, 0), 8) + base32(fortyBits(random, 5), 8);
}

/** Adds one to the 80-bit number, in place (wrapping, as a ULID generator may after 2^80 ids in one millisecond). */
function incrementRandom(bytes: Uint8Array): void {
  for (let i = bytes.length - 1; i >= 0; i -= 1) {
    const byte = bytes[i] ?? 0;
    if (byte !== 255) {
      bytes[i] = byte + 1;
      return;
    }
    bytes[i] = 0;
  }
}

/**
 * A lower-case ULID: 48 bits of milliseconds and 80 random bits, monotonic within one process so ids made in the same
 * millisecond still sort in creation order.
 *
 * @example
 * ```ts
 * ulid(); // '01k9z3…' (26 characters)
 * ```
 */
export function ulid(nowMs: number = Date.now()): string {
  if (nowMs <= lastTime) {
    incrementRandom(lastRandom);
    return encodeUlid(lastTime, lastRandom);
  }
  lastTime = nowMs;
  drawRandom(lastRandom);
  return encodeUlid(nowMs, lastRandom);
}

/**
 * A prefixed id such as `node_01k…`, `wf_01k…` or `cmd_01k…`.
 *
 * @example
 * ```ts
 * newId('node'); // 'node_01k9z3…'
 * ```
 */
export function newId(prefix: string): string {
  if (!PREFIX.test(prefix)) {
    throw new ComputeError('INVALID_CONFIG', `id prefix must be lower-case letters and digits: ${prefix}`, {
      details: { path: ['prefix'] },
    });
  }
  return `${prefix}_${ulid()}`;
}

/**
 * Whether `id` is a well-formed id with the given prefix.
 *
 * @example
 * ```ts
 * isId(newId('wf'), 'wf'); // true
 * ```
 */
export function isId(id: unknown, prefix: string): id is string {
  return typeof id === 'string' && new RegExp(`^${prefix}_[0-9a-hjkmnp-tv-z]{26}$`).test(id);
}
