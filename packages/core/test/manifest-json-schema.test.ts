import { toStandardJsonSchema } from '@valibot/to-json-schema';
import * as v from 'valibot';
import { describe, expect, it } from 'vitest';
import { MAX_DURATION_MS } from '../src/duration';
import { isComputeError } from '../src/errors';
import { field, manifest, toJsonSchema } from '../src/manifest';

const settings = manifest({
  port: field.int({ min: 1, max: 65535 }).default(50000).describe('TCP port of the API'),
  branch: field.string({ pattern: '^[0-9]+\\.[0-9]+$', maxLength: 16 }).describe('Firmware branch'),
  ratio: field.number({ min: 0 }).optional(),
  mode: field.enum(['fast', 'safe']),
  enabled: field.boolean(),
  timeout: field.duration().default('30s'),
  token: field.secretRef(),
  extra: field.json().describe('Anything JSON'),
  disks: field.array(field.object({ device: field.string(), wipe: field.boolean().default(true) }), { minItems: 1 }),
});

describe('manifest JSON Schema', () => {
  it('describes the input side in draft 2020-12 with descriptions, defaults and no extra keys', () => {
    expect(settings.toJsonSchema()).toEqual({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: {
        port: { type: 'integer', minimum: 1, maximum: 65535, description: 'TCP port of the API', default: 50000 },
        branch: { type: 'string', maxLength: 16, pattern: '^[0-9]+\\.[0-9]+$', description: 'Firmware branch' },
        ratio: { type: 'number', minimum: 0 },
        mode: { type: 'string', enum: ['fast', 'safe'] },
        enabled: { type: 'boolean' },
        timeout: {
          anyOf: [
            { type: 'string', pattern: expect.any(String) },
            { type: 'integer', minimum: 1, maximum: MAX_DURATION_MS },
          ],
          default: '30s',
        },
        token: { type: 'string', pattern: '^sec_[0-9a-hjkmnp-tv-z]{26}$' },
        extra: { description: 'Anything JSON' },
        disks: {
          type: 'array',
          minItems: 1,
          items: {
            type: 'object',
            properties: { device: { type: 'string' }, wipe: { type: 'boolean', default: true } },
            required: ['device'],
            additionalProperties: false,
          },
        },
      },
      required: ['branch', 'mode', 'enabled', 'token', 'extra', 'disks'],
      additionalProperties: false,
    });
  });

  it('describes the output side: defaulted keys required and durations in milliseconds', () => {
    const output = settings.toJsonSchema({ io: 'output' });
    expect(output.required).toEqual(['port', 'branch', 'mode', 'enabled', 'timeout', 'token', 'extra', 'disks']);
    expect((output.properties as Record<string, unknown>).timeout).toEqual({
      type: 'integer',
      minimum: 1,
      maximum: MAX_DURATION_MS,
      default: 30_000,
    });
  });

  it('the duration pattern in the schema accepts exactly the strings parseDuration reads', () => {
    const timeout = (settings.toJsonSchema().properties as Record<string, { anyOf: { pattern?: string }[] }>).timeout;
    const pattern = new RegExp(timeout?.anyOf[0]?.pattern ?? '$^', 'u');
    for (const good of ['30s', '1h30m', '500ms', '2d']) expect(pattern.test(good)).toBe(true);
    for (const bad of ['30', '30m1h', '1.5h', '5x']) expect(pattern.test(bad)).toBe(false);
  });

  it('writes draft-07 and OpenAPI 3.0 on request', () => {
    expect(settings.toJsonSchema({ target: 'draft-07' }).$schema).toBe('http://json-schema.org/draft-07/schema#');
    expect(settings.toJsonSchema({ target: 'openapi-3.0' })).not.toHaveProperty('$schema');
    expect(toJsonSchema(settings, { target: 'draft-07' })).toEqual(settings.toJsonSchema({ target: 'draft-07' }));
  });

  it('is a Standard JSON Schema, and refuses a target it does not write', () => {
    const converter = settings['~standard'].jsonSchema;
    expect(converter.input({ target: 'draft-2020-12' })).toEqual(settings.toJsonSchema());
    expect(converter.output({ target: 'draft-07' })).toEqual(
      settings.toJsonSchema({ target: 'draft-07', io: 'output' }),
    );
    expect(() => converter.input({ target: 'draft-04' })).toThrow();
    const error = (() => {
      try {
        settings.toJsonSchema({ target: 'draft-04' as never });
      } catch (caught) {
        return caught;
      }
    })();
    expect(isComputeError(error, 'INVALID_CONFIG')).toBe(true);
  });

  it('is itself JSON that survives a round trip', () => {
    const schema = settings.toJsonSchema();
    expect(JSON.parse(JSON.stringify(schema))).toEqual(schema);
  });

  it('toJsonSchema exports any Standard JSON Schema and refuses a schema without one', () => {
    const valibotSchema = toStandardJsonSchema(v.object({ nodeId: v.string() }));
    expect(toJsonSchema(valibotSchema)).toMatchObject({ type: 'object', properties: { nodeId: { type: 'string' } } });
    const plain = { '~standard': { version: 1, vendor: 'x', validate: (value: unknown) => ({ value }) } };
    expect(() => toJsonSchema(plain)).toThrow(/cannot export JSON Schema/);
  });
});
