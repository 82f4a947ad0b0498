import { ComputeError } from '../errors';
import type { Json } from '../json';

/** A JSON Schema document or fragment. */
export type JsonSchemaObject = { [key: string]: Json };

/** Which JSON Schema dialect to write. `openapi-3.0` is the same schema without `$schema`. */
export type JsonSchemaTarget = 'draft-2020-12' | 'draft-07' | 'openapi-3.0';

/**
 * Which side of validation to describe: `input` (what a caller may send: defaulted keys optional, durations as
 * strings or numbers) or `output` (what `validate` returns: defaulted keys present, durations in milliseconds).
 */
export type JsonSchemaIo = 'input' | 'output';

/** Options of `toJsonSchema`. */
export interface JsonSchemaOptions {
  /** The dialect; JSON Schema draft 2020-12 unless told otherwise. */
  target?: JsonSchemaTarget;
  /** Input or output side; `input` unless told otherwise. */
  io?: JsonSchemaIo;
}

const SCHEMA_URI: Record<JsonSchemaTarget, string | undefined> = {
  'draft-2020-12': 'https://json-schema.org/draft/2020-12/schema',
  'draft-07': 'http://json-schema.org/draft-07/schema#',
  'openapi-3.0': undefined,
};

/** Reads and checks the options, so a typo in `target` is an error rather than a schema of the wrong dialect. */
export function resolveJsonSchemaOptions(options: JsonSchemaOptions | undefined): Required<JsonSchemaOptions> {
  const target = options?.target ?? 'draft-2020-12';
  const io = options?.io ?? 'input';
  if (!Object.hasOwn(SCHEMA_URI, target)) {
    throw new ComputeError('INVALID_CONFIG', 'JSON Schema target must be draft-2020-12, draft-07 or openapi-3.0', {
      details: { path: ['target'] },
    });
  }
  if (io !== 'input' && io !== 'output') {
    throw new ComputeError('INVALID_CONFIG', 'JSON Schema io must be input or output', { details: { path: ['io'] } });
  }
  return { target, io };
}

/** Puts the dialect's `$schema` first on a root schema. */
export function withSchemaUri(schema: JsonSchemaObject, target: JsonSchemaTarget): JsonSchemaObject {
  const uri = SCHEMA_URI[target];
  return uri === undefined ? schema : { $schema: uri, ...schema };
}
