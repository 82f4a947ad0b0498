import * as v from 'valibot';
import { refuseConfig } from '../checks/checks';
import { DURATION_PATTERN, type Duration, MAX_DURATION_MS, parseDuration } from '../duration';
import { isComputeError } from '../errors';
import { checkJson, type Json, storableTextProblem } from '../json';
import type { SecretRef } from '../ports';
import { Field, type FieldShape, isField, type RequiredField } from './field';
import type { FieldInput, FieldOutput, ShapeInput, ShapeOutput } from './infer';
import type { JsonSchemaObject } from './json-schema';
import { checkShape, shapeJsonSchema, shapeSchema } from './object-schema';

/** Options of `field.string`. `pattern` is a regular expression source (JSON Schema style, not anchored for you). */
export interface StringFieldOptions {
  pattern?: string;
  minLength?: number;
  maxLength?: number;
}

/** Options of `field.int` and `field.number`: inclusive bounds. */
export interface NumberFieldOptions {
  min?: number;
  max?: number;
}

/** Options of `field.array`. */
export interface ArrayFieldOptions {
  minItems?: number;
  maxItems?: number;
}

/**
 * The shape of a secret reference: `sec_` and a 26-character lower-case ULID.
 *
 * @example
 * ```ts
 * SECRET_REF_PATTERN.test(await ctx.secrets!.put('root', value)); // true
 * ```
 */
export const SECRET_REF_PATTERN = /^sec_[0-9a-hjkmnp-tv-z]{26}$/;

function refuse(message: string, option: string): never {
  return refuseConfig(message, [option]);
}

// Options are read by destructuring, which would throw a bare TypeError on null; anything but a plain object (or
// nothing) is a definition mistake worth naming.
function optionsOf<T extends object>(options: T | undefined): T {
  if (options === undefined) return {} as T;
  const proto: unknown = typeof options === 'object' && options !== null ? Object.getPrototypeOf(options) : undefined;
  if (Array.isArray(options) || (proto !== Object.prototype && proto !== null)) {
    refuse('options must be an object', 'options');
  }
  return options;
}

// Every string a manifest accepts may end up in a text or jsonb column, neither of which holds these.
const storableText = v.rawCheck<string>(({ dataset, addIssue }) => {
  if (!dataset.typed) return;
  const problem = storableTextProblem(dataset.value);
  if (problem !== undefined) addIssue({ message: problem });
});

function checkCount(value: number | undefined, option: string): void {
  if (value !== undefined && !(Number.isSafeInteger(value) && value >= 0)) {
    refuse(`${option} must be a whole number of 0 or more`, option);
  }
}

function checkBounds(low: number | undefined, high: number | undefined, names: [string, string], integer: boolean) {
  for (const [value, name] of [
    [low, names[0]],
    [high, names[1]],
  ] as const) {
    if (value !== undefined && !(integer ? Number.isSafeInteger(value) : Number.isFinite(value))) {
      refuse(`${name} must be ${integer ? 'a whole number' : 'a finite number'}`, name);
    }
  }
  if (low !== undefined && high !== undefined && low > high)
    refuse(`${names[0]} must not exceed ${names[1]}`, names[0]);
}

function compilePattern(pattern: string): RegExp {
  if (typeof pattern !== 'string') refuse('pattern must be a regular expression source string', 'pattern');
  try {
    return new RegExp(pattern, 'u');
  } catch {
    return refuse('pattern is not a valid regular expression', 'pattern');
  }
}

function stringField(options?: StringFieldOptions): Field<string> {
  const { pattern, minLength, maxLength } = optionsOf(options);
  checkCount(minLength, 'minLength');
  checkCount(maxLength, 'maxLength');
  checkBounds(minLength, maxLength, ['minLength', 'maxLength'], true);
  const steps: v.PipeItem<string, string, v.BaseIssue<unknown>>[] = [storableText];
  if (minLength !== undefined) steps.push(v.minLength(minLength, `must be at least ${minLength} characters`));
  if (maxLength !== undefined) steps.push(v.maxLength(maxLength, `must be at most ${maxLength} characters`));
  if (pattern !== undefined) steps.push(v.regex(compilePattern(pattern), `must match the pattern ${pattern}`));
  const jsonSchema: JsonSchemaObject = { type: 'string' };
  if (minLength !== undefined) jsonSchema.minLength = minLength;
  if (maxLength !== undefined) jsonSchema.maxLength = maxLength;
  if (pattern !== undefined) jsonSchema.pattern = pattern;
  return new Field({
    kind: 'string',
    schema: v.pipe(v.string('expected a string'), ...steps),
    jsonSchema: () => jsonSchema,
  });
}

function numericField(kind: 'int' | 'number', options?: NumberFieldOptions): Field<number> {
  const { min, max } = optionsOf(options);
  const integer = kind === 'int';
  checkBounds(min, max, ['min', 'max'], integer);
  const steps: v.PipeItem<number, number, v.BaseIssue<unknown>>[] = [
    integer ? v.safeInteger('expected a whole number') : v.finite('expected a finite number'),
  ];
  if (min !== undefined) steps.push(v.minValue(min, `must be at least ${min}`));
  if (max !== undefined) steps.push(v.maxValue(max, `must be at most ${max}`));
  const jsonSchema: JsonSchemaObject = { type: integer ? 'integer' : 'number' };
  if (min !== undefined) jsonSchema.minimum = min;
  if (max !== undefined) jsonSchema.maximum = max;
  return new Field({
    kind,
    schema: v.pipe(v.number(integer ? 'expected a whole number' : 'expected a number'), ...steps),
    jsonSchema: () => jsonSchema,
  });
}

function enumField<const T extends readonly [string, ...string[]]>(values: T): Field<T[number]> {
  if (!Array.isArray(values) || values.length === 0 || values.some((value) => typeof value !== 'string')) {
    refuse('field.enum takes a non-empty list of strings', 'values');
  }
  if (new Set(values).size !== values.length) refuse('field.enum values must be distinct', 'values');
  const options = Object.freeze([...values]);
  const expected = `expected one of ${options.map((value) => JSON.stringify(value)).join(', ')}`;
  return new Field({
    kind: 'enum',
    schema: v.picklist(options, expected),
    jsonSchema: () => ({ type: 'string', enum: [...options] }),
  });
}

function arrayField<F extends RequiredField>(
  item: F,
  options?: ArrayFieldOptions,
): Field<FieldOutput<F>[], FieldInput<F>[]> {
  if (!isField(item)) refuse('field.array takes a field.* value for its items', 'item');
  if (item.presence !== 'required') refuse('array items cannot be optional or have a default', 'item');
  const { minItems, maxItems } = optionsOf(options);
  checkCount(minItems, 'minItems');
  checkCount(maxItems, 'maxItems');
  checkBounds(minItems, maxItems, ['minItems', 'maxItems'], true);
  const steps: v.PipeItem<unknown[], unknown[], v.BaseIssue<unknown>>[] = [];
  if (minItems !== undefined) steps.push(v.minLength(minItems, `must have at least ${minItems} items`));
  if (maxItems !== undefined) steps.push(v.maxLength(maxItems, `must have at most ${maxItems} items`));
  return new Field({
    kind: 'array',
    schema: v.pipe(v.array(item.schema, 'expected an array'), ...steps),
    jsonSchema: (io) => {
      const schema: JsonSchemaObject = { type: 'array', items: item.toJsonSchema(io) };
      if (minItems !== undefined) schema.minItems = minItems;
      if (maxItems !== undefined) schema.maxItems = maxItems;
      return schema;
    },
  });
}

function objectField<S extends FieldShape>(shape: S): Field<ShapeOutput<S>, ShapeInput<S>> {
  checkShape(shape, ['fields']);
  const frozen = Object.freeze({ ...shape });
  return new Field({ kind: 'object', schema: shapeSchema(frozen), jsonSchema: (io) => shapeJsonSchema(frozen, io) });
}

function jsonField(): Field<Json> {
  const schema = v.pipe(
    v.unknown(),
    v.rawCheck(({ dataset, addIssue }) => {
      const issue = checkJson(dataset.value);
      if (issue === undefined) return;
      // Report the offending element itself, e.g. ['with', 'list', 2], not just the field.
      const [first, ...rest] = issue.path.map(
        (key): v.UnknownPathItem => ({ type: 'unknown', origin: 'value', input: dataset.value, key, value: undefined }),
      );
      addIssue(first === undefined ? { message: issue.message } : { message: issue.message, path: [first, ...rest] });
    }),
  );
  return new Field({ kind: 'json', schema, jsonSchema: () => ({}) });
}

function durationField(): Field<number, Duration> {
  const schema = v.pipe(
    v.unknown(),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      try {
        return parseDuration(dataset.value);
      } catch (error) {
        if (!isComputeError(error)) throw error;
        addIssue({ message: error.message });
        return NEVER;
      }
    }),
  );
  const output: JsonSchemaObject = { type: 'integer', minimum: 1, maximum: MAX_DURATION_MS };
  const input: JsonSchemaObject = { anyOf: [{ type: 'string', pattern: DURATION_PATTERN.source }, output] };
  return new Field({ kind: 'duration', schema, jsonSchema: (io) => (io === 'input' ? input : output) });
}

function secretRefField(): Field<SecretRef> {
  const message = 'expected a secret reference (sec_…)';
  return new Field({
    kind: 'secretRef',
    schema: v.pipe(v.string(message), v.regex(SECRET_REF_PATTERN, message)),
    jsonSchema: () => ({ type: 'string', pattern: SECRET_REF_PATTERN.source }),
  });
}

/**
 * The field builders of a manifest. Every one returns an immutable {@link Field}; bad options are INVALID_CONFIG with
 * `details.path` naming the option.
 *
 * @example
 * ```ts
 * const settings = manifest({
 *   branch: field.string({ pattern: '^[0-9]+\\.[0-9]+$' }),
 *   port: field.int({ min: 1, max: 65535 }).default(50000),
 *   mode: field.enum(['fast', 'safe']).optional(),
 *   timeout: field.duration().default('10m'),
 *   token: field.secretRef(),
 * });
 * ```
 */
export const field = Object.freeze({
  /** A string, optionally with a `pattern` (regex source, unanchored) and length bounds. */
  string: stringField,
  /** A whole number (a safe integer), optionally within inclusive `min`/`max`. */
  int: (options?: NumberFieldOptions): Field<number> => numericField('int', options),
  /** A finite number, optionally within inclusive `min`/`max`. */
  number: (options?: NumberFieldOptions): Field<number> => numericField('number', options),
  /** `true` or `false`. */
  boolean: (): Field<boolean> =>
    new Field({
      kind: 'boolean',
      schema: v.boolean('expected true or false'),
      jsonSchema: () => ({ type: 'boolean' }),
    }),
  /** One of a fixed list of strings; the output type is their union. */
  enum: enumField,
  /** A list of one kind of (required) field, optionally with `minItems`/`maxItems`. */
  array: arrayField,
  /** A nested object with exactly these fields (unknown keys are refused). */
  object: objectField,
  /** Any JSON value, checked deeply (see `checkJson`). */
  json: jsonField,
  /** A duration (`'30s'`, `'10m'`, `'1h'`, … or milliseconds); the output is milliseconds. */
  duration: durationField,
  /** A secret reference (`sec_…`), never a secret value. */
  secretRef: secretRefField,
});
