import * as v from 'valibot';
import { ComputeError } from '../errors';
import { assertJson, deepFreeze, type Json } from '../json';
import type { JsonSchemaIo, JsonSchemaObject } from './json-schema';

/** Whether a field must be given (`required`), may be left out (`optional`), or is filled in when left out (`defaulted`). */
export type FieldPresence = 'required' | 'optional' | 'defaulted';

/** The kinds of field a manifest is made of. */
export type FieldKind =
  | 'string'
  | 'int'
  | 'number'
  | 'boolean'
  | 'enum'
  | 'array'
  | 'object'
  | 'json'
  | 'duration'
  | 'secretRef';

/** What a field kind is made of: its valibot schema and how it describes itself in JSON Schema. */
export interface FieldDefinition {
  readonly kind: FieldKind;
  readonly schema: v.GenericSchema;
  readonly jsonSchema: (io: JsonSchemaIo) => JsonSchemaObject;
}

const FIELD_BRAND = Symbol.for('better-compute.field');

interface FieldState {
  readonly presence: FieldPresence;
  readonly description: string | undefined;
  readonly defaultInput: Json | undefined;
  readonly defaultOutput: Json | undefined;
}

function copyOf<T>(value: T): T {
  return typeof value === 'object' && value !== null ? structuredClone(value) : value;
}

/**
 * One field of a manifest: an immutable builder made by `field.*`. `.optional()`, `.default(v)` and `.describe(text)`
 * each return a new field; `.optional()` drops a default and `.default(v)` replaces `.optional()`.
 *
 * @example
 * ```ts
 * const port = field.int({ min: 1, max: 65535 }).default(50000).describe('TCP port of the Talos API');
 * ```
 */
export class Field<TOutput, TInput = TOutput, TPresence extends FieldPresence = 'required'> {
  /** Type-level only: the output and input types of the field. */
  declare readonly '~types'?: { readonly output: TOutput; readonly input: TInput };
  readonly [FIELD_BRAND] = true;
  readonly kind: FieldKind;
  readonly presence: TPresence;
  readonly description: string | undefined;
  /** The default as written (input form), when there is one. */
  readonly defaultValue: TInput | undefined;
  /** The valibot schema of the field with its presence applied, as a manifest's object schema uses it. */
  readonly schema: v.GenericSchema;
  readonly #definition: FieldDefinition;
  readonly #state: FieldState;

  /** Made by the `field.*` builders; not meant to be called directly. */
  constructor(definition: FieldDefinition, state?: FieldState) {
    this.#definition = definition;
    this.#state = state ?? {
      presence: 'required',
      description: undefined,
      defaultInput: undefined,
      defaultOutput: undefined,
    };
    this.kind = definition.kind;
    this.presence = this.#state.presence as TPresence;
    this.description = this.#state.description;
    this.defaultValue = this.#state.defaultInput as TInput | undefined;
    const { defaultInput } = this.#state;
    if (this.#state.presence === 'optional') this.schema = v.optional(definition.schema);
    else if (this.#state.presence === 'defaulted')
      this.schema = v.optional(definition.schema, () => copyOf(defaultInput));
    else this.schema = definition.schema;
    Object.freeze(this);
  }

  /**
   * The same field, allowed to be left out (its output is then absent).
   *
   * @example
   * ```ts
   * manifest({ note: field.string().optional() }); // { note?: string }
   * ```
   */
  optional(): Field<TOutput, TInput, 'optional'> {
    return new Field(this.#definition, {
      ...this.#state,
      presence: 'optional',
      defaultInput: undefined,
      defaultOutput: undefined,
    });
  }

  /**
   * The same field, filled in with `value` when left out. The default must itself pass the field, or this throws
   * INVALID_CONFIG (path `['default']`).
   *
   * @example
   * ```ts
   * field.duration().default('30s'); // output 30000 when left out
   * ```
   */
  default(value: TInput): Field<TOutput, TInput, 'defaulted'> {
    assertJson(value, ['default']);
    const result = v.safeParse(this.#definition.schema, value);
    if (!result.success) {
      throw new ComputeError('INVALID_CONFIG', `the default does not pass its field: ${result.issues[0].message}`, {
        details: { path: ['default'] },
      });
    }
    return new Field(this.#definition, {
      ...this.#state,
      presence: 'defaulted',
      defaultInput: deepFreeze(copyOf(value) as Json) as Json,
      defaultOutput: deepFreeze(result.output as Json) as Json,
    });
  }

  /**
   * The same field with a description, which JSON Schema output carries.
   *
   * @example
   * ```ts
   * field.string().describe('The NIC firmware branch, e.g. 22.31');
   * ```
   */
  describe(text: string): Field<TOutput, TInput, TPresence> {
    if (typeof text !== 'string') {
      throw new ComputeError('INVALID_CONFIG', 'a description must be a string', { details: { path: ['describe'] } });
    }
    return new Field(this.#definition, { ...this.#state, description: text });
  }

  /**
   * The JSON Schema of this field alone, with its description and default.
   *
   * @example
   * ```ts
   * field.int({ min: 1 }).default(5).toJsonSchema(); // { type: 'integer', minimum: 1, default: 5 }
   * ```
   */
  toJsonSchema(io: JsonSchemaIo = 'input'): JsonSchemaObject {
    const schema: JsonSchemaObject = { ...this.#definition.jsonSchema(io) };
    if (this.#state.description !== undefined) schema.description = this.#state.description;
    const fallback = io === 'input' ? this.#state.defaultInput : this.#state.defaultOutput;
    if (fallback !== undefined) schema.default = copyOf(fallback);
    return schema;
  }
}

/** Any field, whatever its types. */
export type AnyField = Field<unknown, unknown, FieldPresence>;

/** A field that must be given: what arrays hold. */
export type RequiredField = Field<unknown, unknown, 'required'>;

/** The fields of a manifest or of `field.object`, by key. */
export type FieldShape = { readonly [key: string]: AnyField };

/**
 * Whether a value is a manifest field (also one made by another copy of the package).
 *
 * @example
 * ```ts
 * isField(field.string()); // true
 * ```
 */
export function isField(value: unknown): value is AnyField {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[FIELD_BRAND] === true;
}
