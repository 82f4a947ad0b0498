import type { StandardSchemaV1 } from '@standard-schema/spec';
import { toJsonSchema } from '@valibot/to-json-schema';
import type { BaseIssue, BaseSchema } from 'valibot';
import { COMPUTE_ERROR_CODES, HTTP_STATUS_BY_CODE } from '../errors';
import { listApiMethods } from './define';
import type { ApiGroup } from './types';

/** Options of {@link createOpenApiDocument}. */
export interface OpenApiOptions {
  title?: string;
  version?: string;
  /** Where the methods are mounted. Default `/v1`, as `createFetchHandler`. */
  basePath?: string;
}

type JsonSchema = Record<string, unknown>;

// The error statuses every method may answer with; each is described by the one error body.
const ERROR_STATUSES = [...new Set(Object.values(HTTP_STATUS_BY_CODE))].sort((a, b) => a - b);

interface JsonSchemaConverter {
  input?: (options: { target: string }) => JsonSchema;
}

/**
 * The JSON Schema (draft 2020-12, the dialect of OpenAPI 3.1) of what a schema accepts: valibot schemas through
 * `@valibot/to-json-schema` (parts it cannot express become `{}`), schemas implementing Standard JSON Schema through
 * their own converter, and `{}` (anything) for other Standard Schemas.
 *
 * @example
 * ```ts
 * inputJsonSchema(v.object({ nodeId: v.string() })); // { type: 'object', properties: { nodeId: { type: 'string' } }, … }
 * ```
 */
export function inputJsonSchema(schema: StandardSchemaV1): JsonSchema {
  const standard = schema['~standard'] as StandardSchemaV1.Props & { jsonSchema?: JsonSchemaConverter };
  let converted: JsonSchema | undefined;
  try {
    if (standard.vendor === 'valibot') {
      converted = toJsonSchema(schema as unknown as BaseSchema<unknown, unknown, BaseIssue<unknown>>, {
        target: 'draft-2020-12',
        typeMode: 'input',
        errorMode: 'ignore',
      }) as JsonSchema;
    } else if (typeof standard.jsonSchema?.input === 'function') {
      converted = standard.jsonSchema.input({ target: 'draft-2020-12' });
    }
  } catch {
    converted = undefined;
  }
  if (!converted) return {};
  const { $schema: _dialect, ...rest } = converted;
  return rest;
}

/**
 * An OpenAPI 3.1 document of a set of API groups: one `POST <basePath>/<group>.<method>` operation per method with its
 * input schema as the JSON request body, the bearer security scheme, the permission as `x-permission`, and the error
 * body `{ code, message, details }` for every error status.
 *
 * @example
 * ```ts
 * const doc = createOpenApiDocument({ workflows });
 * doc.paths['/v1/workflows.list'].post.requestBody.content['application/json'].schema;
 * ```
 */
export function createOpenApiDocument(
  groups: Readonly<Record<string, ApiGroup>>,
  options: OpenApiOptions = {},
): Record<string, unknown> & { paths: Record<string, Record<string, unknown>> } {
  const basePath = (options.basePath ?? '/v1').replace(/\/+$/, '');
  const errorResponses = Object.fromEntries(
    ERROR_STATUSES.map((status) => [String(status), { $ref: '#/components/responses/Error' }]),
  );
  const paths: Record<string, Record<string, unknown>> = {};
  for (const [groupName, methodName, method] of listApiMethods(groups)) {
    const operationId = `${groupName}.${methodName}`;
    paths[`${basePath}/${operationId}`] = {
      post: {
        operationId,
        tags: [groupName],
        ...(method.description === undefined ? {} : { description: method.description }),
        summary: operationId,
        security: [{ bearer: [] }],
        'x-permission': method.permission,
        requestBody: {
          required: true,
          content: { 'application/json': { schema: inputJsonSchema(method.input) } },
        },
        responses: {
          '200': { description: 'The result.', content: { 'application/json': { schema: {} } } },
          '405': { $ref: '#/components/responses/Error' },
          ...errorResponses,
        },
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: options.title ?? 'better-compute API', version: options.version ?? '1' },
    paths,
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'An API credential token (bc_…).' } },
      schemas: {
        Error: {
          type: 'object',
          required: ['code', 'message', 'details'],
          properties: {
            code: { type: 'string', enum: [...COMPUTE_ERROR_CODES] },
            message: { type: 'string' },
            details: {
              type: 'object',
              properties: {
                path: { type: 'array', items: { type: ['string', 'integer'] } },
                reason: { type: 'string' },
                issues: {
                  type: 'array',
                  items: {
                    type: 'object',
                    required: ['path', 'message'],
                    properties: {
                      path: { type: 'array', items: { type: ['string', 'integer'] } },
                      message: { type: 'string' },
                    },
                  },
                },
              },
            },
          },
        },
      },
      responses: {
        Error: {
          description: 'An error: `code` is one of the closed list.',
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        },
      },
    },
  };
}
