import type { StandardSchemaV1 } from '@standard-schema/spec';
import * as v from 'valibot';
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { Duration } from '../src/duration';
import type { Json } from '../src/json';
import {
  field,
  type InferField,
  type InferManifest,
  type ManifestInput,
  type ManifestOutput,
  manifest,
  validateInput,
} from '../src/manifest';

// These tests are checked by the type checker (`tsc -p packages/core/tsconfig.json`); at run time they only build the
// manifests, so a builder that throws still fails here.
describe('manifest type inference', () => {
  it('infers { port: number } for the documented port manifest', () => {
    const input = manifest({ port: field.int({ min: 1, max: 65535 }).default(50000) });
    expectTypeOf<InferManifest<typeof input>>().toEqualTypeOf<{ port: number }>();
    expectTypeOf<ManifestOutput<typeof input>>().toEqualTypeOf<{ port: number }>();
    expectTypeOf<ManifestInput<typeof input>>().toEqualTypeOf<{ port?: number }>();
    expectTypeOf(input.parse({})).toEqualTypeOf<{ port: number }>();
  });

  it('infers an empty object for manifest({})', () => {
    const input = manifest({});
    // biome-ignore lint/complexity/noBannedTypes: the output of a manifest without fields is exactly {}.
    expectTypeOf<InferManifest<typeof input>>().toEqualTypeOf<{}>();
  });

  it('infers every field kind, optional keys, enums, nested objects and arrays', () => {
    const input = manifest({
      branch: field.string({ pattern: '^[0-9]+\\.[0-9]+$' }),
      ratio: field.number().optional(),
      enabled: field.boolean().default(true),
      mode: field.enum(['fast', 'safe']),
      timeout: field.duration(),
      token: field.secretRef().describe('token reference'),
      extra: field.json().optional(),
      disks: field.array(field.object({ device: field.string(), wipe: field.boolean().default(false) })),
    });
    expectTypeOf<InferManifest<typeof input>>().toEqualTypeOf<{
      branch: string;
      enabled: boolean;
      mode: 'fast' | 'safe';
      timeout: number;
      token: string;
      disks: { device: string; wipe: boolean }[];
      ratio?: number | undefined;
      extra?: Json | undefined;
    }>();
    expectTypeOf<ManifestInput<typeof input>>().toEqualTypeOf<{
      branch: string;
      mode: 'fast' | 'safe';
      timeout: Duration;
      token: string;
      disks: { device: string; wipe?: boolean | undefined }[];
      ratio?: number | undefined;
      enabled?: boolean | undefined;
      extra?: Json | undefined;
    }>();
  });

  it('types a field alone and refuses a default of the wrong type', () => {
    expectTypeOf<InferField<ReturnType<typeof field.duration>>>().toEqualTypeOf<number>();
    // @ts-expect-error a port default must be a number
    expect(() => field.int().default('80')).toThrow();
    // @ts-expect-error an enum default must be one of its values
    expect(() => field.enum(['a', 'b']).default('c')).toThrow();
  });

  it('is a StandardSchemaV1 whose inferred output is the manifest output', async () => {
    const input = manifest({ port: field.int().default(1) });
    expectTypeOf(input).toExtend<StandardSchemaV1<{ port?: number }, { port: number }>>();
    expectTypeOf<StandardSchemaV1.InferOutput<typeof input>>().toEqualTypeOf<{ port: number }>();
    expectTypeOf(await validateInput(input, {})).toEqualTypeOf<{ port: number }>();
    expectTypeOf(await validateInput(v.object({ id: v.string() }), {}).catch(() => ({ id: '' }))).toEqualTypeOf<{
      id: string;
    }>();
  });
});
