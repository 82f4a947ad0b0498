import type { StandardSchemaV1 } from '@standard-schema/spec';
import * as v from 'valibot';
import { describe, expect, it } from 'vitest';
import { createOpenApiDocument, defineApiGroup, defineApiMethod } from '../src/api';
import { COMPUTE_ERROR_CODES } from '../src/errors';

const tenantResource = async () => ({ type: 'compute-tenant', tenantId: 'root' });

// A Standard Schema that is not valibot and offers no JSON Schema.
const anyObject: StandardSchemaV1<Record<string, unknown>> = {
  '~standard': {
    version: 1,
    vendor: 'hand-made',
    validate: (value) =>
      typeof value === 'object' && value !== null
        ? { value: value as Record<string, unknown> }
        : { issues: [{ message: 'expected an object' }] },
  },
};

// A Standard Schema that also implements Standard JSON Schema, as manifests and zod do.
const withConverter = {
  '~standard': {
    ...anyObject['~standard'],
    vendor: 'converter',
    jsonSchema: {
      input: () => ({ $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', required: ['size'] }),
      output: () => ({}),
    },
  },
} as StandardSchemaV1<Record<string, unknown>>;

const workflows = defineApiGroup('workflows', {
  list: defineApiMethod({
    input: v.object({
      tenantId: v.string(),
      nodeId: v.string(),
      limit: v.optional(v.pipe(v.number(), v.integer(), v.maxValue(100))),
    }),
    permission: 'compute:workflows:read',
    resource: tenantResource,
    handler: async () => ({ items: [] }),
    description: 'A node’s workflows, newest first.',
  }),
  abort: defineApiMethod({
    input: v.object({
      tenantId: v.string(),
      nodeId: v.string(),
      workflowId: v.string(),
      reason: v.optional(v.string()),
    }),
    permission: 'compute:workflows:manage',
    resource: tenantResource,
    handler: async () => ({}),
  }),
});
const plugins = defineApiGroup('plugins', {
  loose: defineApiMethod({
    input: anyObject,
    permission: 'compute:plugins:run',
    resource: tenantResource,
    handler: async () => 1,
  }),
  sized: defineApiMethod({
    input: withConverter,
    permission: 'compute:plugins:run',
    resource: tenantResource,
    handler: async () => 1,
  }),
});

type Operation = {
  operationId: string;
  tags: string[];
  description?: string;
  security: unknown[];
  'x-permission': string;
  requestBody: { content: { 'application/json': { schema: Record<string, unknown> } } };
  responses: Record<string, unknown>;
};

const doc = createOpenApiDocument({ workflows, plugins });
const operation = (path: string) => (doc.paths[path] as { post: Operation }).post;
const inputSchema = (path: string) => operation(path).requestBody.content['application/json'].schema;

describe('createOpenApiDocument', () => {
  it('is an OpenAPI 3.1 document with one POST operation per method', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths).sort()).toEqual([
      '/v1/plugins.loose',
      '/v1/plugins.sized',
      '/v1/workflows.abort',
      '/v1/workflows.list',
    ]);
    expect(Object.keys(doc.paths['/v1/workflows.list'] ?? {})).toEqual(['post']);
    expect(operation('/v1/workflows.list')).toMatchObject({
      operationId: 'workflows.list',
      tags: ['workflows'],
      description: 'A node’s workflows, newest first.',
      'x-permission': 'compute:workflows:read',
      security: [{ bearer: [] }],
    });
  });

  it('gives each method the JSON Schema of its valibot input', () => {
    expect(inputSchema('/v1/workflows.list')).toMatchObject({
      type: 'object',
      properties: {
        tenantId: { type: 'string' },
        nodeId: { type: 'string' },
        limit: { type: 'integer', maximum: 100 },
      },
      required: ['tenantId', 'nodeId'],
    });
    expect(inputSchema('/v1/workflows.abort')).toMatchObject({ required: ['tenantId', 'nodeId', 'workflowId'] });
    expect(inputSchema('/v1/workflows.list')).not.toHaveProperty('$schema');
  });

  it('uses a Standard JSON Schema converter when a schema has one, else accepts anything', () => {
    expect(inputSchema('/v1/plugins.sized')).toEqual({ type: 'object', required: ['size'] });
    expect(inputSchema('/v1/plugins.loose')).toEqual({});
  });

  it('declares the bearer scheme and the error body with the closed list of codes', () => {
    const components = doc.components as Record<string, Record<string, Record<string, unknown>>>;
    expect(components.securitySchemes?.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(components.schemas?.Error).toMatchObject({
      required: ['code', 'message', 'details'],
      properties: { code: { enum: [...COMPUTE_ERROR_CODES] } },
    });
    const responses = operation('/v1/workflows.abort').responses;
    for (const status of ['400', '401', '403', '404', '405', '409', '500']) {
      expect(responses[status], status).toEqual({ $ref: '#/components/responses/Error' });
    }
  });

  it('follows a custom base path', () => {
    const nested = createOpenApiDocument({ workflows }, { basePath: '/api/v2' });
    expect(Object.keys(nested.paths).sort()).toEqual(['/api/v2/workflows.abort', '/api/v2/workflows.list']);
  });
});
