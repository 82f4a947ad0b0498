import { describe, expect, it } from 'vitest';
import { isComputeError } from '../src/errors';
import { assertStorableText, findUnstorableText, storableTextProblem } from '../src/json';
import { errorOf } from './support/errors';

describe('storable text', () => {
  it.each(['', 'acme', 'ü 😀 \t\n', '\udbff\udfff'])('accepts %j', (text) => {
    expect(storableTextProblem(text)).toBeUndefined();
  });

  it.each(['\u0000', 'a\u0000b', '\ud800', 'a\udc00', '\udc00\ud800'])('refuses %j', (text) => {
    expect(storableTextProblem(text)).toBeDefined();
  });

  it('refuses a value that is not a string instead of throwing a TypeError', () => {
    expect(storableTextProblem(null as never)).toBe('is not a string');
  });

  it('assertStorableText throws INVALID_INPUT at the path, naming the field and never the text', () => {
    const error = errorOf(() => assertStorableText('hunter2\u0000', ['with', 'token']));
    expect(isComputeError(error, 'INVALID_INPUT')).toBe(true);
    expect((error as { details: unknown }).details).toEqual({ path: ['with', 'token'] });
    expect((error as Error).message).toMatch(/^with\.token contains a NUL/);
    expect((error as Error).message).not.toContain('hunter2');
    expect(
      isComputeError(
        errorOf(() => assertStorableText('\ud800', [], 'INVALID_CONFIG')),
        'INVALID_CONFIG',
      ),
    ).toBe(true);
  });

  it('findUnstorableText finds the first bad string or key in plain data, with its path', () => {
    expect(findUnstorableText({ a: [1, { b: 'ok' }, { c: 'x\u0000' }] }, ['input'])).toEqual({
      path: ['input', 'a', 2, 'c'],
      message: 'contains a NUL character, which PostgreSQL cannot store',
    });
    expect(findUnstorableText({ ok: 1, 'k\ud800': 2 })?.path).toEqual(['k\ud800']);
    expect(findUnstorableText('\u0000')?.path).toEqual([]);
  });

  it('findUnstorableText accepts what only a schema can judge, and stops at 64 levels', () => {
    class Box {
      text = '\u0000';
    }
    expect(findUnstorableText({ at: new Date(), note: undefined, n: Number.NaN, box: new Box() })).toBeUndefined();
    let deep: unknown = '\u0000';
    for (let i = 0; i < 64; i += 1) deep = [deep];
    // 64 arrays deep is walked; a 65th level is left to the schema.
    expect(findUnstorableText(deep)?.path).toHaveLength(64);
    expect(findUnstorableText([deep])).toBeUndefined();
  });
});
