import { randomBytes } from 'node:crypto';
import { ComputeError } from '../errors';

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';
const PREFIX = /^[a-z][a-z0-9]{0,15}$/;

let lastTime = -1;
let lastRandom: Uint8Array = new Uint8Array(10);

function encodeTime(ms: number): string {
  let out = '';
  let rest = ms;
  for (let i = 0; i < 10; i += 1) {
    out = CROCKFORD[rest % 32] + out;
    rest = Math.floor(rest / 32);
  }
  return out;
}

function encodeRandom(bytes: Uint8Array): string {
  // 80 bits as 16 base-32 digits, most significant first.
  let bits = 0n;
  for (const byte of bytes) bits = (bits << 8n) | BigInt(byte);
  let out = '';
  for (let i = 0; i < 16; i += 1) {
    out = CROCKFORD[Number(bits & 31n)] + out;
    bits >>= 5n;
  }
  return out;
}

function incrementRandom(bytes: Uint8Array): Uint8Array {
  const next = new Uint8Array(bytes);
  for (let i = next.length - 1; i >= 0; i -= 1) {
    if (next[i] !== 255) {
      next[i] = (next[i] ?? 0) + 1;
      return next;
    }
    next[i] = 0;
  }
  return next;
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
    lastRandom = incrementRandom(lastRandom);
    return encodeTime(lastTime) + encodeRandom(lastRandom);
  }
  lastTime = nowMs;
  lastRandom = new Uint8Array(randomBytes(10));
  return encodeTime(nowMs) + encodeRandom(lastRandom);
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
