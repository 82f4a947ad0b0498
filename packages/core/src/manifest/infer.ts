import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { AnyField, Field, FieldPresence, FieldShape } from './field';

type Simplify<T> = { [K in keyof T]: T[K] } & {};

/** The output type of a field (`T`, or `T | undefined` when it is optional). */
export type FieldOutput<F> =
  F extends Field<infer O, unknown, infer P> ? (P extends 'optional' ? O | undefined : O) : never;

/** The input type of a field (what a caller may send for it). */
export type FieldInput<F> =
  F extends Field<unknown, infer I, infer P> ? (P extends 'required' ? I : I | undefined) : never;

type KeysWith<S extends FieldShape, P extends FieldPresence> = {
  [K in keyof S]: S[K] extends Field<unknown, unknown, P> ? K : never;
}[keyof S];

/** The output of a shape: optional fields become optional keys; defaulted fields are always present. */
export type ShapeOutput<S extends FieldShape> = Simplify<
  { [K in Exclude<keyof S, KeysWith<S, 'optional'>>]: FieldOutput<S[K]> } & {
    [K in KeysWith<S, 'optional'>]?: FieldOutput<S[K]>;
  }
>;

/** The input of a shape: optional and defaulted fields may be left out. */
export type ShapeInput<S extends FieldShape> = Simplify<
  { [K in KeysWith<S, 'required'>]: FieldInput<S[K]> } & {
    [K in Exclude<keyof S, KeysWith<S, 'required'>>]?: FieldInput<S[K]>;
  }
>;

/**
 * The output type of a manifest, or of any Standard Schema: what `validate` returns.
 *
 * @example
 * ```ts
 * const settings = manifest({ port: field.int({ min: 1, max: 65535 }).default(50000) });
 * type Settings = InferManifest<typeof settings>; // { port: number }
 * ```
 */
export type InferManifest<M> = M extends StandardSchemaV1 ? StandardSchemaV1.InferOutput<M> : never;

/** Another name for {@link InferManifest}. */
export type ManifestOutput<M> = InferManifest<M>;

/**
 * The input type of a manifest, or of any Standard Schema: what a caller may send.
 *
 * @example
 * ```ts
 * type SettingsInput = ManifestInput<typeof settings>; // { port?: number }
 * ```
 */
export type ManifestInput<M> = M extends StandardSchemaV1 ? StandardSchemaV1.InferInput<M> : never;

/** The output type of a single field. */
export type InferField<F extends AnyField> = FieldOutput<F>;
