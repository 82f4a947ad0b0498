import type { ApiMethod } from 'better-compute/core';
import { inputJsonSchema } from 'better-compute/core/kernel';
import fc from 'fast-check';

// Arbitraries for fuzzing API methods: inputs shaped after a method's own JSON Schema, with parts made hostile.

type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  enum?: unknown[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
};

// JSON text cannot say Infinity or -0 through JSON.stringify; these markers become the raw tokens that parse to them
// (1e400 reads back as Infinity), so the HTTP side sees them too.
const RAW_TOKENS: Record<string, string> = {
  '\u0001inf\u0001': '1e400',
  '\u0001-inf\u0001': '-1e400',
  '\u0001-0\u0001': '-0',
};

/**
 * JSON text of a value, writing Infinity as `1e400` and -0 as `-0` (which parse back to them), as a client could send.
 */
export function toJsonText(value: unknown): string {
  const text = JSON.stringify(value, (_key, item: unknown) => {
    if (typeof item !== 'number') return item;
    if (item === Number.POSITIVE_INFINITY) return '\u0001inf\u0001';
    if (item === Number.NEGATIVE_INFINITY) return '\u0001-inf\u0001';
    if (Object.is(item, -0)) return '\u0001-0\u0001';
    return item;
  });
  return (text ?? 'null').replace(/"\\u0001(-?inf|-0)\\u0001"/g, (marker) => {
    const key = JSON.parse(marker) as string;
    return RAW_TOKENS[key] ?? marker;
  });
}

const HOSTILE_TEXT = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udc00',
  '\udbff\udfff',
  '😀',
  '__proto__',
  'constructor',
  'builtin',
  "'; DROP TABLE profiles; --",
  '%s%n',
  'x'.repeat(513),
  'y'.repeat(4097),
  'z'.repeat(200_000),
];

const HOSTILE_NUMBERS = [
  0,
  -0,
  1,
  -1,
  0.5,
  2 ** 31 - 1,
  2 ** 31,
  -(2 ** 31),
  -(2 ** 31) - 1,
  2 ** 32,
  2 ** 53,
  -(2 ** 53),
  Number.MAX_SAFE_INTEGER,
  1e308,
  -1e308,
  5e-324,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  Number.NaN,
];

/** Any UTF-16 units at all: NUL, lone surrogates and controls included. */
const rawText = fc
  .array(fc.integer({ min: 0, max: 0xffff }), { maxLength: 24 })
  .map((units) => String.fromCharCode(...units));

function nested(depth: number): unknown {
  let value: unknown = 'bottom';
  for (let i = 0; i < depth; i += 1) value = i % 2 === 0 ? [value] : { deeper: value };
  return value;
}

/**
 * Built once the lab's real ids are known: a field named like an id is mostly one that exists, so many calls get past
 * "not found" into the handlers, and the rest of the time something hostile.
 */
export function hostility(known: Readonly<Record<string, readonly string[]>>) {
  const everyKnown = [...new Set(Object.values(known).flat())];
  const hostileText = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...HOSTILE_TEXT) },
    { weight: 2, arbitrary: rawText },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  );
  const knownText = (key?: string) => fc.constantFrom(...(known[key ?? ''] ?? everyKnown));
  const text = fc.oneof({ weight: 3, arbitrary: knownText() }, { weight: 2, arbitrary: hostileText });
  const number = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...HOSTILE_NUMBERS) },
    { weight: 2, arbitrary: fc.integer({ min: -3, max: 120 }) },
    { weight: 1, arbitrary: fc.double() },
  );
  const deep = fc.integer({ min: 40, max: 400 }).map(nested);
  const json: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      fc.constant(null),
      fc.boolean(),
      number,
      text,
      deep,
      fc.array(tie('value'), { maxLength: 3 }),
      fc.dictionary(text, tie('value'), { maxKeys: 3 }),
    ),
  })).value;
  // A document field is mostly plausible, so a profile often passes every check but the one hostile part.
  // Whole numbers at the edges of int4 and of the safe integers: a document check that stops at "safe integer" lets
  // them reach an integer column.
  const edgeInteger = fc.constantFrom(2 ** 31 - 1, 2 ** 31, 2 ** 32, Number.MAX_SAFE_INTEGER, -(2 ** 31) - 1);
  const wholeNumber = (valid: fc.Arbitrary<number>) =>
    fc.oneof({ weight: 4, arbitrary: valid }, { weight: 1, arbitrary: edgeInteger }, { weight: 1, arbitrary: number });
  const plausible = <T>(valid: fc.Arbitrary<T>, hostile: fc.Arbitrary<unknown>) =>
    fc.oneof({ weight: 15, arbitrary: valid }, { weight: 1, arbitrary: hostile });
  const step = fc.record(
    {
      use: plausible(fc.constantFrom('lab.noop', 'lab.label', 'lab.hang', 'power.setPower', 'nope.nothing'), text),
      name: plausible(fc.constantFrom('first', 'second'), text),
      with: plausible(fc.constant({}), fc.oneof(fc.dictionary(text, json, { maxKeys: 3 }), json)),
      when: plausible(fc.constantFrom('a=b && !c', 'rack', ''), text),
      timeout: plausible(fc.constantFrom('1m', '1h30m'), fc.oneof(text, number)),
      retries: wholeNumber(fc.integer({ min: 0, max: 3 })),
    },
    { requiredKeys: ['use'] },
  );
  const profile = fc.record(
    {
      id: plausible(fc.constantFrom('lab-prop', 'lab-one'), text),
      version: wholeNumber(fc.integer({ min: 1, max: 3 })),
      target: plausible(fc.constant('metal'), text),
      mode: plausible(fc.constant('provision'), text),
      description: plausible(fc.constant('a profile'), text),
      labels: plausible(fc.constant({ rack: 'r1' }), fc.oneof(fc.dictionary(text, text, { maxKeys: 3 }), json)),
      steps: plausible(fc.array(step, { maxLength: 3 }), json),
      tokenTtlSeconds: wholeNumber(fc.constant(600)),
    },
    { requiredKeys: ['id', 'version', 'target'] },
  );
  const hostile = fc.oneof(hostileText, number, json);
  return { knownText, text, number, json, hostile, profile };
}

/** The arbitraries {@link hostility} builds. */
export type Hostility = ReturnType<typeof hostility>;

/** A value a caller could mean: what the JSON Schema allows, with the lab's real ids where a field is named like one. */
function plausibleFor(schema: JsonSchema, h: Hostility, key?: string): fc.Arbitrary<unknown> {
  const branches = schema.anyOf ?? schema.oneOf;
  if (branches && branches.length > 0) return fc.oneof(...branches.map((branch) => plausibleFor(branch, h, key)));
  if (schema.enum && schema.enum.length > 0) return fc.constantFrom(...schema.enum);
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  if (type === 'object') {
    const properties = Object.entries(schema.properties ?? {});
    const model = Object.fromEntries(properties.map(([name, inner]) => [name, plausibleFor(inner, h, name)]));
    const required = (schema.required ?? []).filter((name) => name in model);
    return fc.record(model, { requiredKeys: required });
  }
  if (type === 'string') return h.knownText(key);
  if (type === 'number' || type === 'integer') return fc.integer({ min: 1, max: 5 });
  if (type === 'boolean') return fc.boolean();
  if (type === 'array') return fc.array(plausibleFor(schema.items ?? {}, h), { maxLength: 2 });
  return key === 'profile' ? h.profile : fc.constant({});
}

/** One thing done to a plausible input: a field made hostile, a field left out, or a hostile field added. */
type Mutation = { kind: 'set' | 'drop'; key: string; value: unknown };

function mutate(input: unknown, mutations: readonly Mutation[]): unknown {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return input;
  const value: Record<string, unknown> = { ...input };
  for (const mutation of mutations) {
    if (mutation.kind === 'drop') delete value[mutation.key];
    else value[mutation.key] = mutation.value;
  }
  return value;
}

/**
 * Inputs for one method: a plausible input with up to three of its fields (or new ones) made hostile, so that every
 * field is attacked while the others still lead the call as far as it goes; now and then a whole hostile value.
 */
export function inputsFor(method: ApiMethod, h: Hostility): fc.Arbitrary<unknown> {
  const schema = inputJsonSchema(method.input) as JsonSchema;
  const keys = Object.keys(schema.properties ?? {});
  const key = keys.length > 0 ? fc.oneof({ weight: 5, arbitrary: fc.constantFrom(...keys) }, h.text) : h.text;
  const mutation = fc.record({
    kind: fc.constantFrom<'set' | 'drop'>('set', 'set', 'set', 'drop'),
    key,
    value: h.hostile,
  });
  const mutated = fc
    .tuple(plausibleFor(schema, h), fc.array(mutation, { maxLength: 3 }))
    .map(([input, mutations]) => mutate(input, mutations));
  return fc.oneof({ weight: 12, arbitrary: mutated }, { weight: 1, arbitrary: h.json });
}

/** A short, printable account of an input for a failure message (it may hold 200,000-character strings and NULs). */
export function describeInput(input: unknown): string {
  const text = toJsonText(input);
  return text.length > 300 ? `${text.slice(0, 300)}… (${text.length} characters)` : text;
}
