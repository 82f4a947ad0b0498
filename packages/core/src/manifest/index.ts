export { type AnyField, Field, type FieldKind, type FieldPresence, type FieldShape, isField } from './field';
export {
  type ArrayFieldOptions,
  field,
  type NumberFieldOptions,
  SECRET_REF_PATTERN,
  type StringFieldOptions,
} from './fields';
export type {
  FieldInput,
  FieldOutput,
  InferField,
  InferManifest,
  ManifestInput,
  ManifestOutput,
  ShapeInput,
  ShapeOutput,
} from './infer';
export type { JsonSchemaIo, JsonSchemaObject, JsonSchemaOptions, JsonSchemaTarget } from './json-schema';
export { isManifest, type Manifest, type ManifestStandardProps, manifest, toJsonSchema } from './manifest';
export { isStandardSchema, validateInput, validateInputSync } from './validate-input';
