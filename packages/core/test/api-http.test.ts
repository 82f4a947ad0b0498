import * as v from 'valibot';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  createApi,
  createCredential,
  createFetchHandler,
  defineApiGroup,
  defineApiMethod,
  resolveNodeResource,
} from '../src/api';
import { createCommandKindRegistry } from '../src/commands';
import { COMPUTE_ERROR_CODES, ComputeError, HTTP_STATUS_BY_CODE } from '../src/errors';
import { newId } from '../src/ids';
import type { ModuleContext } from '../src/kernel';
import { SqlError } from '../src/sql';
import { insertNode, manualClock, migrateCore, resetTenants } from './conformance/credentials';
import { type ScratchDatabase, scratchPglite } from './support/databases';

const clock = manualClock();
let scratch: ScratchDatabase;

function stubContext(): ModuleContext {
  const unavailable = () => {
    throw new Error('not part of this test');
  };
  const quiet = () => undefined;
  return {
    sql: scratch.db,
    clock,
    events: { publish: unavailable } as unknown as ModuleContext['events'],
    work: { enqueue: unavailable } as unknown as ModuleContext['work'],
    commands: { enqueue: unavailable } as unknown as ModuleContext['commands'],
    commandKinds: createCommandKindRegistry([]),
    log: { debug: quiet, info: quiet, warn: quiet, error: quiet },
    config: {},
  };
}

const probe = defineApiGroup('probe', {
  echo: defineApiMethod({
    input: v.object({ tenantId: v.string(), nodeId: v.string(), note: v.optional(v.string()) }),
    permission: 'compute:probe:read',
    resource: (input, ctx) => resolveNodeResource(ctx.sql, input.tenantId, input.nodeId),
    handler: async (input) => ({ nodeId: input.nodeId, note: input.note ?? null }),
  }),
  fail: defineApiMethod({
    input: v.object({ code: v.picklist(COMPUTE_ERROR_CODES) }),
    permission: 'compute:probe:read',
    resource: async () => ({ type: 'compute-tenant', tenantId: 'root' }),
    handler: async (input): Promise<never> => {
      throw new ComputeError(input.code, `failed with ${input.code}`, { details: { reason: 'probe' } });
    },
  }),
  crash: defineApiMethod({
    input: v.object({}),
    permission: 'compute:probe:read',
    resource: async () => ({ type: 'compute-tenant', tenantId: 'root' }),
    handler: async () => {
      throw new TypeError('secret s3cr3t leaked');
    },
  }),
  databaseFault: defineApiMethod({
    input: v.object({ reason: v.picklist(['connection-lost', 'serialization-failure', 'query-canceled', 'other']) }),
    permission: 'compute:probe:read',
    resource: async () => ({ type: 'compute-tenant', tenantId: 'root' }),
    handler: async (input): Promise<never> => {
      throw new SqlError('password=s3cr3t lost', { reason: input.reason, cause: new Error('s3cr3t') });
    },
  }),
  nothing: defineApiMethod({
    input: v.object({ note: v.optional(v.string()) }),
    permission: 'compute:probe:read',
    resource: async () => ({ type: 'compute-tenant', tenantId: 'root' }),
    handler: async () => undefined,
  }),
});

let handler: (request: Request) => Promise<Response>;
let root: string;

function post(path: string, body: unknown, token: string | null = root, init: RequestInit = {}) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token !== null) headers.authorization = `Bearer ${token}`;
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  return handler(new Request(`http://cp.test${path}`, { method: 'POST', headers, body: text, ...init }));
}

async function read(response: Response) {
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

beforeAll(async () => {
  scratch = await scratchPglite();
  await migrateCore(scratch.db, clock);
  handler = createFetchHandler(createApi({ groups: { probe }, makeContext: stubContext, sql: scratch.db }));
});
afterAll(async () => {
  await scratch?.drop();
});
beforeEach(async () => {
  await resetTenants(scratch.db, clock);
  root = (await createCredential(scratch.db, { tenantId: 'root', name: 'root', permissions: ['compute:*'], clock }))
    .token;
});

describe('HTTP API', () => {
  it('answers POST /v1/<group>.<method> with 200 and the JSON result', async () => {
    const nodeId = await insertNode(scratch.db, 'acme', clock);
    const response = await post('/v1/probe.echo', { tenantId: 'acme', nodeId, note: 'hi' });
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await read(response)).toEqual({ status: 200, body: { nodeId, note: 'hi' } });
  });

  it('answers a handler that returns nothing with null', async () => {
    expect(await read(await post('/v1/probe.nothing', {}))).toEqual({ status: 200, body: null });
  });

  it('maps the documented codes to their statuses with a { code, message, details } body', async () => {
    const expected = {
      INVALID_INPUT: 400,
      UNAUTHENTICATED: 401,
      PERMISSION_DENIED: 403,
      NOT_FOUND: 404,
      CONFLICT: 409,
      INVALID_STATE: 409,
      INTERNAL: 500,
    } as const;
    for (const [code, status] of Object.entries(expected)) {
      const response = await read(await post('/v1/probe.fail', { code }));
      expect(response).toEqual({
        status,
        body: { code, message: `failed with ${code}`, details: { reason: 'probe' } },
      });
    }
  });

  it('maps every other code through HTTP_STATUS_BY_CODE', async () => {
    for (const code of COMPUTE_ERROR_CODES) {
      const { status, body } = await read(await post('/v1/probe.fail', { code }));
      expect({ code: body.code, status }).toEqual({ code, status: HTTP_STATUS_BY_CODE[code] });
    }
  });

  it('answers a missing, malformed or revoked token with the same 401 and a Bearer challenge', async () => {
    const revoked = await createCredential(scratch.db, {
      tenantId: 'acme',
      name: 'r',
      permissions: ['compute:*'],
      clock,
    });
    await scratch.db.query('UPDATE credentials SET revoked_at = $1 WHERE id = $2', [clock.now(), revoked.id]);
    const responses = [
      await post('/v1/probe.nothing', {}, null),
      await post('/v1/probe.nothing', {}, 'not-a-token'),
      await post('/v1/probe.nothing', {}, revoked.token),
      await handler(
        new Request('http://cp.test/v1/probe.nothing', { method: 'POST', headers: { authorization: `Basic ${root}` } }),
      ),
    ];
    const bodies = await Promise.all(responses.map((r) => r.text()));
    expect(responses.map((r) => r.status)).toEqual([401, 401, 401, 401]);
    expect(responses.every((r) => r.headers.get('www-authenticate') === 'Bearer')).toBe(true);
    expect(new Set(bodies).size).toBe(1);
    expect(JSON.parse(bodies[0] ?? '')).toMatchObject({ code: 'UNAUTHENTICATED' });
  });

  it('answers 403 for a missing permission and 404 with one body for a foreign or missing node', async () => {
    const acme = (
      await createCredential(scratch.db, { tenantId: 'acme', name: 'a', permissions: ['compute:x:read'], clock })
    ).token;
    const own = await insertNode(scratch.db, 'acme', clock);
    const foreign = await insertNode(scratch.db, 'globex', clock);
    expect((await post('/v1/probe.echo', { tenantId: 'acme', nodeId: own }, acme)).status).toBe(403);
    const foreignBody = await read(await post('/v1/probe.echo', { tenantId: 'globex', nodeId: foreign }, acme));
    const missingBody = await read(await post('/v1/probe.echo', { tenantId: 'acme', nodeId: newId('node') }, acme));
    expect(foreignBody.status).toBe(404);
    expect(foreignBody).toEqual(missingBody);
  });

  it('answers INTERNAL for an unknown throw with a generic message', async () => {
    const response = await post('/v1/probe.crash', {});
    const text = await response.text();
    expect(response.status).toBe(500);
    expect(JSON.parse(text)).toEqual({ code: 'INTERNAL', message: 'internal error', details: {} });
    expect(text).not.toContain('s3cr3t');
  });

  it('answers a database fault with what the caller can do about it, never 500 and never its message', async () => {
    const answers: Record<string, unknown> = {};
    for (const reason of ['connection-lost', 'serialization-failure', 'query-canceled', 'other']) {
      const response = await post('/v1/probe.databaseFault', { reason });
      const text = await response.text();
      expect(text).not.toContain('s3cr3t');
      const body = JSON.parse(text) as { code: string; details: Record<string, unknown> };
      answers[reason] = { status: response.status, code: body.code, details: body.details };
    }
    expect(answers).toEqual({
      'connection-lost': {
        status: 504,
        code: 'TIMEOUT',
        details: { retryable: true, reason: 'database-connection-lost' },
      },
      'serialization-failure': {
        status: 409,
        code: 'CONFLICT',
        details: { retryable: true, reason: 'database-serialization-failure' },
      },
      'query-canceled': {
        status: 504,
        code: 'TIMEOUT',
        details: { retryable: false, reason: 'database-statement-timeout' },
      },
      // A statement the database refused for a reason of its own is a bug of ours: INTERNAL, without its message.
      other: { status: 500, code: 'INTERNAL', details: {} },
    });
  });

  it('answers malformed JSON with 400 INVALID_INPUT without quoting the body', async () => {
    const response = await read(await post('/v1/probe.nothing', '{"note": "pa55word'));
    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ code: 'INVALID_INPUT', details: { reason: 'malformed-json' } });
    expect(JSON.stringify(response.body)).not.toContain('pa55word');
  });

  it('answers schema failures with 400 and the path of the field', async () => {
    const response = await read(await post('/v1/probe.echo', { tenantId: 'acme', nodeId: 7 }));
    expect(response).toMatchObject({ status: 400, body: { code: 'INVALID_INPUT', details: { path: ['nodeId'] } } });
  });

  it('reads an empty body as an empty object', async () => {
    const response = await handler(
      new Request('http://cp.test/v1/probe.nothing', { method: 'POST', headers: { authorization: `Bearer ${root}` } }),
    );
    expect(response.status).toBe(200);
  });

  it('refuses a body over 1 MiB with 400, whether or not it declares its length', async () => {
    const declared = await read(
      await post('/v1/probe.nothing', '{}', root, {
        headers: { authorization: `Bearer ${root}`, 'content-length': String(1024 * 1024 + 1) },
      }),
    );
    expect(declared).toMatchObject({
      status: 400,
      body: { code: 'INVALID_INPUT', details: { reason: 'body-too-large' } },
    });
    const big = JSON.stringify({ note: 'x'.repeat(1024 * 1024) });
    expect(await read(await post('/v1/probe.nothing', big))).toMatchObject({ status: 400 });
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 3; i += 1) controller.enqueue(new TextEncoder().encode('x'.repeat(512 * 1024)));
        controller.close();
      },
    });
    const streamed = await handler(
      new Request('http://cp.test/v1/probe.nothing', {
        method: 'POST',
        headers: { authorization: `Bearer ${root}` },
        body: stream,
        duplex: 'half',
      } as RequestInit),
    );
    expect(await read(streamed)).toMatchObject({ status: 400, body: { details: { reason: 'body-too-large' } } });
    expect((await post('/v1/probe.nothing', { note: 'x'.repeat(1000) })).status).toBe(200);
  });

  it('answers other HTTP methods on a known method with 405 and Allow: POST', async () => {
    for (const method of ['GET', 'PUT', 'DELETE']) {
      const response = await handler(
        new Request('http://cp.test/v1/probe.echo', { method, headers: { authorization: `Bearer ${root}` } }),
      );
      expect(response.status).toBe(405);
      expect(response.headers.get('allow')).toBe('POST');
      expect(await response.json()).toMatchObject({ code: 'INVALID_INPUT', details: { reason: 'method-not-allowed' } });
    }
  });

  it('answers unknown methods and paths outside the base path with 404 NOT_FOUND', async () => {
    for (const path of [
      '/v1/probe.nope',
      '/v1/nope.echo',
      '/v1/probe',
      '/v2/probe.echo',
      '/probe.echo',
      '/v1/probe.echo/x',
    ]) {
      expect(await read(await post(path, {}))).toMatchObject({ status: 404, body: { code: 'NOT_FOUND' } });
    }
  });

  it('mounts under another base path', async () => {
    const nested = createFetchHandler(createApi({ groups: { probe }, makeContext: stubContext, sql: scratch.db }), {
      basePath: '/api/v2/',
    });
    const request = new Request('http://cp.test/api/v2/probe.nothing', {
      method: 'POST',
      headers: { authorization: `Bearer ${root}` },
      body: '{}',
    });
    expect((await nested(request)).status).toBe(200);
  });
});
