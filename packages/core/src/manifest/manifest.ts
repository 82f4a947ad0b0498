import type { StandardJSONSchemaV1, StandardSchemaV1 } from '@standard-schema/spec';
import * as v from 'valibot';
import { ComputeError, type ErrorPath } from '../errors';
import type { FieldShape } from './field';
import type { ShapeInput, ShapeOutput } from './infer';
import {
  type JsonSchemaObject,
  type JsonSchemaOptions,
  type JsonSchemaTarget,
  resolveJsonSchemaOptions,
  withSchemaUri,
} from './json-schema';
import { checkShape, shapeJsonSchema, shapeSchema } from './object-schema';
import { isStandardSchema, validateInputSync } from './validate-input';

const MANIFEST_BRAND = Symbol.for('better-compute.manifest');

/** The `~standard` properties of a manifest: Standard Schema v1 and Standard JSON Schema v1 at once. */
export type ManifestStandardProps<I, O> = StandardSchemaV1.Props<I, O> & StandardJSONSchemaV1.Props<I, O>;

/**
 * A manifest: the typed, validated shape of a step's input, a config unit's settings or a command's payload. It is a
 * Standard Schema (vendor `better-compute`): `validate` returns the output with defaults applied, or issues with paths.
 */
export interface Manifest<S extends FieldShape = FieldShape> {
  readonly '~standard': ManifestStandardProps<ShapeInput<S>, ShapeOutput<S>>;
  /** The fields, by key. */
  readonly fields: Readonly<S>;
  /** The valibot schema the manifest validates with. */
  readonly schema: v.GenericSchema;
  /**
   * The JSON Schema of the manifest (draft 2020-12 unless `target` says otherwise), with descriptions and defaults.
   *
   * @example
   * ```ts
   * settings.toJsonSchema(); // { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', … }
   * ```
   */
  toJsonSchema(options?: JsonSchemaOptions): JsonSchemaObject;
  /**
   * Validates synchronously and returns the output, or throws INVALID_INPUT (see `validateInput`).
   *
   * @example
   * ```ts
   * settings.parse({ port: 8080 }, ['with']); // { port: 8080 }
   * ```
   */
  parse(value: unknown, basePath?: ErrorPath): ShapeOutput<S>;
}

function toStandardIssue(issue: v.BaseIssue<unknown>): StandardSchemaV1.Issue {
  const path = issue.path?.map((item) => item.key as PropertyKey);
  return path === undefined || path.length === 0 ? { message: issue.message } : { message: issue.message, path };
}

function checkTarget(target: JsonSchemaTarget): JsonSchemaTarget {
  return resolveJsonSchemaOptions({ target }).target;
}

/**
 * Makes a manifest from fields. Unknown keys are refused, defaults are filled in, and the output type is inferred.
 * A shape that is not an object of fields, or a field name such as `__proto__` or `constructor`, is INVALID_CONFIG.
 *
 * @example
 * ```ts
 * const input = manifest({ port: field.int({ min: 1, max: 65535 }).default(50000) });
 * input.parse({}); // { port: 50000 }
 * ```
 */
export function manifest<S extends FieldShape>(fields: S): Manifest<S> {
  checkShape(fields, ['fields']);
  const frozenFields = Object.freeze({ ...fields });
  const schema = shapeSchema(frozenFields);
  const jsonSchema = (options: JsonSchemaOptions = {}): JsonSchemaObject => {
    const { target, io } = resolveJsonSchemaOptions(options);
    return withSchemaUri(shapeJsonSchema(frozenFields, io), target);
  };
  const standard: ManifestStandardProps<ShapeInput<S>, ShapeOutput<S>> = Object.freeze({
    version: 1,
    vendor: 'better-compute',
    validate(value: unknown): StandardSchemaV1.Result<ShapeOutput<S>> {
      const result = v.safeParse(schema, value);
      if (result.success) return { value: result.output as ShapeOutput<S> };
      return { issues: result.issues.map(toStandardIssue) };
    },
    jsonSchema: Object.freeze({
      input: (options: StandardJSONSchemaV1.Options) =>
        jsonSchema({ target: checkTarget(options.target as JsonSchemaTarget), io: 'input' }),
      output: (options: StandardJSONSchemaV1.Options) =>
        jsonSchema({ target: checkTarget(options.target as JsonSchemaTarget), io: 'output' }),
    }),
  });
  const made: Manifest<S> & { [MANIFEST_BRAND]: true } = {
    [MANIFEST_BRAND]: true,
    '~standard': standard,
    fields: frozenFields,
    schema,
    toJsonSchema: jsonSchema,
    parse: (value, basePath = []) => validateInputSync(made, value, basePath) as ShapeOutput<S>,
  };
  return Object.freeze(made);
}

/**
 * Whether a value is a manifest made by {@link manifest} (also by another copy of the package).
 *
 * @example
 * ```ts
 * isManifest(manifest({})); // true
 * isManifest(v.object({})); // false: a Standard Schema, but not a manifest
 * ```
 */
export function isManifest(value: unknown): value is Manifest {
  return (
    isStandardSchema(value) &&
    (value as unknown as Record<symbol, unknown>)[MANIFEST_BRAND] === true &&
    value['~standard'].vendor === 'better-compute'
  );
}

/**
 * The JSON Schema of a manifest, or of any Standard JSON Schema (`~standard.jsonSchema`, e.g. from valibot's
 * `toStandardJsonSchema`). Draft 2020-12 unless `target` says otherwise; the input side unless `io` says `output`.
 * Anything else is INVALID_CONFIG.
 *
 * @example
 * ```ts
 * toJsonSchema(step.input, { target: 'draft-07' });
 * ```
 */
export function toJsonSchema(schema: unknown, options: JsonSchemaOptions = {}): JsonSchemaObject {
  if (isManifest(schema)) return schema.toJsonSchema(options);
  const { target, io } = resolveJsonSchemaOptions(options);
  const props = (schema as { '~standard'?: Partial<StandardJSONSchemaV1.Props> } | null)?.['~standard'];
  const converter = props?.jsonSchema;
  if (typeof converter?.input !== 'function' || typeof converter.output !== 'function') {
    throw new ComputeError('INVALID_CONFIG', 'the schema cannot export JSON Schema (not a manifest)', {
      details: { path: [] },
    });
  }
  return (io === 'input' ? converter.input({ target }) : converter.output({ target })) as JsonSchemaObject;
}
