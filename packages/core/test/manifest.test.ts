import { describe, expect, it } from 'vitest';
import { isComputeError } from '../src/errors';
import { field, isField, manifest } from '../src/manifest';
import { errorOf } from './support/errors';

function issuesOf(result: unknown) {
  return (result as { issues?: { message: string; path?: unknown[] }[] }).issues;
}

const SECRET = 'sec_01k9z3abcdefghjkmnpqrstvwx';

describe('manifest: the documented samples', () => {
  it('manifest({}) accepts an empty object and nothing else', () => {
    const input = manifest({});
    expect(input['~standard'].validate({})).toEqual({ value: {} });
    expect(issuesOf(input['~standard'].validate({ stray: 1 }))).toEqual([{ message: 'unknown key', path: ['stray'] }]);
  });

  it('fills the port default and checks its bounds', () => {
    const input = manifest({ port: field.int({ min: 1, max: 65535 }).default(50000) });
    expect(input.parse({})).toEqual({ port: 50000 });
    expect(input.parse({ port: 8080 })).toEqual({ port: 8080 });
    expect(issuesOf(input['~standard'].validate({ port: 0 }))).toEqual([
      { message: 'must be at least 1', path: ['port'] },
    ]);
    expect(issuesOf(input['~standard'].validate({ port: 70000 }))?.[0]?.path).toEqual(['port']);
    expect(issuesOf(input['~standard'].validate({ port: 1.5 }))?.[0]?.message).toBe('expected a whole number');
  });

  it('checks a config unit branch against its pattern', () => {
    const settings = manifest({ branch: field.string({ pattern: '^[0-9]+\\.[0-9]+$' }) });
    expect(settings.parse({ branch: '22.31' })).toEqual({ branch: '22.31' });
    expect(issuesOf(settings['~standard'].validate({ branch: '22.31-rc' }))?.[0]?.path).toEqual(['branch']);
    expect(issuesOf(settings['~standard'].validate({}))).toEqual([{ message: 'required', path: ['branch'] }]);
  });
});

describe('manifest: validation', () => {
  const input = manifest({
    name: field.string({ minLength: 1, maxLength: 8 }),
    ratio: field.number({ min: 0, max: 1 }).optional(),
    enabled: field.boolean().default(false),
    mode: field.enum(['fast', 'safe']).default('safe'),
    timeout: field.duration().default('30s'),
    token: field.secretRef().optional(),
    extra: field.json().optional(),
    disks: field
      .array(field.object({ device: field.string(), wipe: field.boolean().default(true) }), { maxItems: 2 })
      .optional(),
  });

  it('returns the output with every default applied, without touching the input', () => {
    const given = { name: 'n1' };
    expect(input.parse(given)).toEqual({ name: 'n1', enabled: false, mode: 'safe', timeout: 30_000 });
    expect(given).toEqual({ name: 'n1' });
  });

  it('applies defaults inside nested objects of arrays and turns durations into milliseconds', () => {
    const output = input.parse({ name: 'n1', timeout: '1h30m', disks: [{ device: '/dev/sda' }] });
    expect(output.timeout).toBe(5_400_000);
    expect(output.disks).toEqual([{ device: '/dev/sda', wipe: true }]);
  });

  it('accepts a secret reference and any JSON value', () => {
    const output = input.parse({ name: 'n', token: SECRET, extra: { a: [1, null, 'x'] }, ratio: 0.5 });
    expect(output).toMatchObject({ token: SECRET, extra: { a: [1, null, 'x'] }, ratio: 0.5 });
  });

  it('reports every issue with its nested path', () => {
    const result = input['~standard'].validate({
      name: '',
      mode: 'slow',
      timeout: '5x',
      token: 'hunter2',
      extra: { list: [1, 2, () => 3] },
      disks: [{ device: '/dev/sda' }, { device: 7, wipe: 'yes', size: 1 }, { device: 'c' }],
      surprise: true,
    });
    const byPath = new Map(issuesOf(result)?.map((issue) => [JSON.stringify(issue.path), issue.message]));
    expect([...byPath.keys()].sort()).toEqual(
      [
        '["name"]',
        '["mode"]',
        '["timeout"]',
        '["token"]',
        '["extra","list",2]',
        '["disks",1,"device"]',
        '["disks",1,"wipe"]',
        '["disks",1,"size"]',
        '["surprise"]',
      ].sort(),
    );
    expect(byPath.get('["disks",1,"size"]')).toBe('unknown key');
  });

  it('refuses more items than maxItems', () => {
    const result = input['~standard'].validate({
      name: 'n',
      disks: [{ device: 'a' }, { device: 'b' }, { device: 'c' }],
    });
    expect(issuesOf(result)).toEqual([{ message: 'must have at most 2 items', path: ['disks'] }]);
  });

  it('never echoes a refused value in its messages', () => {
    const result = input['~standard'].validate({ name: 'a-very-secret-value', token: 'a-very-secret-value' });
    expect(JSON.stringify(issuesOf(result))).not.toContain('a-very-secret-value');
  });

  it.each([[[]], [null], ['x'], [new Date()], [new (class Settings {})()], [new Map()]])(
    'refuses %j where an object is expected',
    (value) => {
      expect(issuesOf(input['~standard'].validate(value))).toEqual([{ message: 'expected an object' }]);
      expect(issuesOf(input['~standard'].validate({ name: 'n', disks: [value] }))).toEqual([
        { message: 'expected an object', path: ['disks', 0] },
      ]);
    },
  );

  it('gives each output its own copy of an object default', () => {
    const withList = manifest({
      tags: field.array(field.string()).default(['a']),
      extra: field.json().default({ k: [1] }),
    });
    const first = withList.parse({});
    first.tags.push('mutated');
    (first.extra as { k: number[] }).k.push(2);
    expect(withList.parse({})).toEqual({ tags: ['a'], extra: { k: [1] } });
  });

  it('parse throws INVALID_INPUT with the base path prefixed', () => {
    const error = errorOf(() => input.parse({ name: 5 }, ['steps', 2, 'with']));
    expect(isComputeError(error, 'INVALID_INPUT')).toBe(true);
    expect((error as { details: { path: unknown } }).details.path).toEqual(['steps', 2, 'with', 'name']);
  });
});

describe('fields: builders', () => {
  it('are immutable: each modifier returns a new field', () => {
    const base = field.int();
    const described = base.describe('count');
    const defaulted = described.default(3);
    expect(Object.isFrozen(base)).toBe(true);
    expect(base.description).toBeUndefined();
    expect(described.description).toBe('count');
    expect(described.presence).toBe('required');
    expect(defaulted.presence).toBe('defaulted');
    expect(defaulted.defaultValue).toBe(3);
    expect(defaulted.optional().presence).toBe('optional');
    expect(defaulted.optional().defaultValue).toBeUndefined();
    expect(isField(defaulted)).toBe(true);
    expect(isField({ kind: 'int' })).toBe(false);
  });

  it('keep the description across modifiers in any order', () => {
    expect(field.string().optional().describe('x').description).toBe('x');
    expect(field.string().describe('x').default('y').description).toBe('x');
  });

  it.each([
    ['a default the field refuses', () => field.int({ min: 1 }).default(0), ['default']],
    ['a default that is not JSON', () => field.json().default({ at: new Date() } as never), ['default', 'at']],
    ['a duration default that is not a duration', () => field.duration().default('soon'), ['default']],
    ['min above max', () => field.int({ min: 5, max: 1 }), ['min']],
    ['a fractional int bound', () => field.int({ min: 0.5 }), ['min']],
    ['an infinite number bound', () => field.number({ max: Number.POSITIVE_INFINITY }), ['max']],
    ['a bad pattern', () => field.string({ pattern: '([' }), ['pattern']],
    ['a negative minLength', () => field.string({ minLength: -1 }), ['minLength']],
    ['minLength above maxLength', () => field.string({ minLength: 3, maxLength: 2 }), ['minLength']],
    ['an empty enum', () => field.enum([] as unknown as ['a']), ['values']],
    ['a repeated enum value', () => field.enum(['a', 'a']), ['values']],
    ['an optional array item', () => field.array(field.string().optional() as never), ['item']],
    ['an array of something else', () => field.array('string' as never), ['item']],
    ['a fractional maxItems', () => field.array(field.string(), { maxItems: 1.5 }), ['maxItems']],
    ['an object entry that is not a field', () => field.object({ a: 'x' as never }), ['fields', 'a']],
    ['a manifest entry that is not a field', () => manifest({ a: { kind: 'string' } as never }), ['fields', 'a']],
    ['a __proto__ field', () => manifest(JSON.parse('{"__proto__": 1}')), ['fields', '__proto__']],
    ['a constructor field', () => manifest({ constructor: field.string() } as never), ['fields', 'constructor']],
    ['a shape that is an array', () => manifest([] as never), ['fields']],
    ['string options that are null', () => field.string(null as never), ['options']],
    ['int options that are null', () => field.int(null as never), ['options']],
    ['number options that are null', () => field.number(null as never), ['options']],
    ['array options that are null', () => field.array(field.string(), null as never), ['options']],
    ['string options that are a string', () => field.string('^a$' as never), ['options']],
    ['int options that are an array', () => field.int([1, 2] as never), ['options']],
    ['a minLength that is text', () => field.string({ minLength: '3' as never }), ['minLength']],
    ['a bound that is text', () => field.int({ max: '3' as never }), ['max']],
    ['an object shape that is null', () => field.object(null as never), ['fields']],
    ['an enum that is null', () => field.enum(null as never), ['values']],
    ['a description that is not text', () => field.string().describe(null as never), ['describe']],
  ])('refuse %s with INVALID_CONFIG at the option', (_name, build, path) => {
    const error = errorOf(build);
    expect(isComputeError(error, 'INVALID_CONFIG')).toBe(true);
    expect((error as { details: { path: unknown } }).details.path).toEqual(path);
  });

  it('a secretRef accepts only sec_ references', () => {
    const refs = manifest({ ref: field.secretRef() });
    expect(refs.parse({ ref: SECRET })).toEqual({ ref: SECRET });
    for (const bad of [
      'sec_short',
      'node_01k9z3abcdefghjkmnpqrstvwx',
      `${SECRET}x`,
      'sec_01K9Z3ABCDEFGHJKMNPQRSTVWX',
      5,
    ]) {
      expect(issuesOf(refs['~standard'].validate({ ref: bad }))?.[0]?.path).toEqual(['ref']);
    }
  });

  it('a duration accepts strings and positive whole milliseconds only', () => {
    const timing = manifest({ timeout: field.duration() });
    expect(timing.parse({ timeout: 1500 })).toEqual({ timeout: 1500 });
    expect(timing.parse({ timeout: '10m' })).toEqual({ timeout: 600_000 });
    for (const bad of [0, -5, 1.5, '10', '31d', null, true]) {
      expect(issuesOf(timing['~standard'].validate({ timeout: bad }))?.[0]?.path).toEqual(['timeout']);
    }
  });

  it.each([
    ['a NUL', 'a\u0000b'],
    ['a lone high surrogate', 'a\ud800b'],
    ['a lone low surrogate', '\udc00'],
  ])('a string refuses %s, which PostgreSQL cannot store, with INVALID_INPUT at its path', (_name, text) => {
    const names = manifest({ list: field.array(field.object({ name: field.string() })) });
    expect(issuesOf(names['~standard'].validate({ list: [{ name: text }] }))?.[0]?.path).toEqual(['list', 0, 'name']);
    const error = errorOf(() => names.parse({ list: [{ name: text }] }));
    expect(isComputeError(error, 'INVALID_INPUT')).toBe(true);
    expect((error as { details: { path: unknown } }).details.path).toEqual(['list', 0, 'name']);
    expect(names.parse({ list: [{ name: 'a \ud83d\ude00 pair' }] })).toEqual({
      list: [{ name: 'a \ud83d\ude00 pair' }],
    });
  });

  it('a required json field refuses a missing key and an explicit undefined', () => {
    const data = manifest({ value: field.json() });
    expect(data.parse({ value: null })).toEqual({ value: null });
    expect(issuesOf(data['~standard'].validate({}))).toEqual([{ message: 'required', path: ['value'] }]);
    expect(issuesOf(data['~standard'].validate({ value: undefined }))?.[0]?.path).toEqual(['value']);
  });
});
