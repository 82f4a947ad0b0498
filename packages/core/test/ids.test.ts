import { describe, expect, it } from 'vitest';
import { ComputeError } from '../src/errors';
import { isId, newId, ulid } from '../src/ids';
import { encodeUlid } from '../src/ids/ids';

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';

// The ULID encoding written the slow, obvious way: the whole 80 bits as one BigInt.
function referenceUlid(ms: number, random: Uint8Array): string {
  let time = '';
  let rest = ms;
  for (let i = 0; i < 10; i += 1) {
    time = CROCKFORD.charAt(rest % 32) + time;
    rest = Math.floor(rest / 32);
  }
  let bits = 0n;
  for (const byte of random) bits = (bits << 8n) | BigInt(byte);
  let tail = '';
  for (let i = 0; i < 16; i += 1) {
    tail = CROCKFORD.charAt(Number(bits & 31n)) + tail;
    bits >>= 5n;
  }
  return time + tail;
}

// Ids stay sorted in a process: one made for an earlier time than an id made before carries that id's time. So each
// test that asks for a time takes one an hour after any asked for before it, in whatever order the tests run (files
// that share the process make theirs at now).
let lastAsked = Date.now();
const laterThanAnyBefore = () => {
  lastAsked += 3_600_000;
  return lastAsked;
};

describe('ids', () => {
  it('encodes the time and the 80 random bits as the ULID specification does, at the edges and in between', () => {
    const cases: [number, Uint8Array][] = [
      [0, new Uint8Array(10)],
      [2 ** 48 - 1, new Uint8Array(10).fill(255)],
      [1_796_000_000_000, Uint8Array.from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])],
      [1_796_000_000_001, Uint8Array.from([128, 0, 0, 0, 1, 255, 0, 0, 0, 0])],
    ];
    for (let seed = 1; seed <= 200; seed += 1) {
      cases.push([seed * 7_919_000_003, Uint8Array.from({ length: 10 }, (_, i) => (seed * 31 + i * 97) % 256)]);
    }
    for (const [ms, random] of cases) expect(encodeUlid(ms, random)).toBe(referenceUlid(ms, random));
    expect(encodeUlid(0, new Uint8Array(10))).toBe('0'.repeat(26));
    expect(encodeUlid(2 ** 48 - 1, new Uint8Array(10).fill(255))).toBe('7'.padEnd(26, 'z'));
  });

  it('makes 26 lower-case Crockford characters led by the time', () => {
    const ms = laterThanAnyBefore();
    const id = ulid(ms);
    expect(id).toMatch(/^[0-9a-hjkmnp-tv-z]{26}$/);
    expect(id.slice(0, 10)).toBe(referenceUlid(ms, new Uint8Array(10)).slice(0, 10));
  });

  it('sorts ids of one millisecond, or of a clock that went back, in the order they were made', () => {
    const ms = laterThanAnyBefore();
    const made = [ulid(ms), ulid(ms), ulid(ms), ulid(ms - 5), ulid(ms)];
    expect([...made].sort()).toEqual(made);
    expect(new Set(made).size).toBe(made.length);
    // Later milliseconds draw fresh random bits and still sort after.
    const later = ulid(ms + 1);
    expect(later > (made.at(-1) ?? '')).toBe(true);
  });

  it('draws fresh random bits for each new millisecond', () => {
    const start = laterThanAnyBefore();
    const tails = new Set(Array.from({ length: 2_000 }, (_, i) => ulid(start + i).slice(10)));
    expect(tails.size).toBe(2_000);
  });

  it('prefixes ids, recognises them, and refuses a bad prefix with INVALID_CONFIG', () => {
    const id = newId('wf');
    expect(isId(id, 'wf')).toBe(true);
    expect(isId(id, 'node')).toBe(false);
    expect(isId(`${id}x`, 'wf')).toBe(false);
    expect(() => newId('Bad-Prefix')).toThrow(ComputeError);
    try {
      newId('Bad-Prefix');
    } catch (err) {
      expect(err).toMatchObject({ code: 'INVALID_CONFIG', details: { path: ['prefix'] } });
    }
  });
});
