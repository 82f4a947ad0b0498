import * as v from 'valibot';
import { afterAll, beforeAll, beforeEach, describe, expect, expectTypeOf, it } from 'vitest';
import {
  type ApiCallContext,
  createApi,
  createCredential,
  defineApiGroup,
  defineApiMethod,
  resolveNodeResource,
} from '../src/api';
import { createCommandKindRegistry } from '../src/commands';
import { ComputeError } from '../src/errors';
import { newId } from '../src/ids';
import type { ModuleContext } from '../src/kernel';
import { insertNode, manualClock, migrateCore, resetTenants } from './conformance/credentials';
import { type ScratchDatabase, scratchPglite } from './support/databases';

const clock = manualClock();
const logged: unknown[] = [];
let scratch: ScratchDatabase;
let handled: string[] = [];

function stubContext(): ModuleContext {
  const unavailable = () => {
    throw new Error('not part of this test');
  };
  const record = (level: string) => (message: string, fields?: unknown) => void logged.push({ level, message, fields });
  return {
    sql: scratch.db,
    clock,
    events: { publish: unavailable } as unknown as ModuleContext['events'],
    work: { enqueue: unavailable } as unknown as ModuleContext['work'],
    commands: { enqueue: unavailable } as unknown as ModuleContext['commands'],
    commandKinds: createCommandKindRegistry([]),
    log: { debug: record('debug'), info: record('info'), warn: record('warn'), error: record('error') },
    config: {},
  };
}

const nodeInput = v.object({ tenantId: v.string(), nodeId: v.string(), workflowId: v.string() });
const onNode = (input: { tenantId: string; nodeId: string }, ctx: ModuleContext) =>
  resolveNodeResource(ctx.sql, input.tenantId, input.nodeId);

const workflows = defineApiGroup('workflows', {
  get: defineApiMethod({
    input: nodeInput,
    permission: 'compute:workflows:read',
    resource: onNode,
    handler: async (input, ctx: ApiCallContext) => {
      handled.push('get');
      return { workflowId: input.workflowId, caller: ctx.principal.tenantId, node: ctx.resource.id };
    },
  }),
  abort: defineApiMethod({
    input: v.object({
      tenantId: v.string(),
      nodeId: v.string(),
      workflowId: v.string(),
      reason: v.optional(v.string()),
    }),
    permission: 'compute:workflows:manage',
    resource: onNode,
    handler: async (input) => {
      handled.push('abort');
      return { aborted: input.workflowId, reason: input.reason ?? null };
    },
  }),
  crash: defineApiMethod({
    input: nodeInput,
    permission: 'compute:workflows:read',
    resource: onNode,
    handler: async () => {
      throw new Error('connection to db:5432 failed for password hunter2');
    },
  }),
  busy: defineApiMethod({
    input: nodeInput,
    permission: 'compute:workflows:manage',
    resource: onNode,
    handler: async () => {
      throw new ComputeError('CONFLICT', 'the node has another active workflow');
    },
  }),
});

const settings = defineApiGroup('settings', {
  tidy: defineApiMethod({
    input: v.object({ steps: v.array(v.object({ with: v.object({ port: v.number() }) })) }),
    permission: 'compute:settings:manage',
    resource: async () => ({ type: 'compute-tenant', tenantId: 'root' }),
    handler: async (input) => input.steps.length,
  }),
});

function dispatcher() {
  return createApi({ groups: { workflows, settings }, makeContext: stubContext, sql: scratch.db });
}

async function token(tenantId: string, permissions: string[]) {
  return (await createCredential(scratch.db, { tenantId, name: 'test', permissions, clock })).token;
}

async function failure(promise: Promise<unknown>) {
  try {
    await promise;
  } catch (error) {
    return error as ComputeError;
  }
  throw new Error('expected the call to fail');
}

beforeAll(async () => {
  scratch = await scratchPglite();
  await migrateCore(scratch.db, clock);
});
afterAll(async () => {
  await scratch?.drop();
});
beforeEach(async () => {
  await resetTenants(scratch.db, clock);
  handled = [];
  logged.length = 0;
});

describe('createApi', () => {
  it('calls a typed method with a credential and returns the handler result', async () => {
    const acme = await token('acme', ['compute:workflows:read']);
    const nodeId = await insertNode(scratch.db, 'acme', clock);
    const result = await dispatcher().api.workflows.get(acme, { tenantId: 'acme', nodeId, workflowId: 'wf_1' });
    expect(result).toEqual({ workflowId: 'wf_1', caller: 'acme', node: nodeId });
  });

  it('types each method from its schema and handler', () => {
    const { api } = dispatcher();
    expectTypeOf(api.workflows.abort).parameter(1).toEqualTypeOf<{
      tenantId: string;
      nodeId: string;
      workflowId: string;
      reason?: string | undefined;
    }>();
    expectTypeOf(api.workflows.get).returns.resolves.toEqualTypeOf<{
      workflowId: string;
      caller: string;
      node: string | undefined;
    }>();
    expectTypeOf(api.settings.tidy).returns.resolves.toEqualTypeOf<number>();
    expect(Object.keys(api).sort()).toEqual(['settings', 'workflows']);
    expect(Object.keys(api.workflows).sort()).toEqual(['abort', 'busy', 'crash', 'get']);
  });

  it('lets a root credential act on a node of any tenant', async () => {
    const root = await token('root', ['compute:workflows:*']);
    const nodeId = await insertNode(scratch.db, 'globex', clock);
    const result = await dispatcher().call('workflows', 'abort', root, {
      tenantId: 'globex',
      nodeId,
      workflowId: 'wf_9',
    });
    expect(result).toEqual({ aborted: 'wf_9', reason: null });
  });

  it('answers another tenant’s node with the same body as a missing node', async () => {
    const acme = await token('acme', ['compute:*']);
    const globexNode = await insertNode(scratch.db, 'globex', clock);
    const { api } = dispatcher();
    const foreign = await failure(api.workflows.get(acme, { tenantId: 'globex', nodeId: globexNode, workflowId: 'w' }));
    const viaOwnTenant = await failure(
      api.workflows.get(acme, { tenantId: 'acme', nodeId: globexNode, workflowId: 'w' }),
    );
    const missing = await failure(
      api.workflows.get(acme, { tenantId: 'acme', nodeId: newId('node'), workflowId: 'w' }),
    );
    expect(foreign.code).toBe('NOT_FOUND');
    expect(foreign.toJSON()).toEqual(missing.toJSON());
    expect(viaOwnTenant.toJSON()).toEqual(missing.toJSON());
    expect(handled).toEqual([]);
  });

  it('answers a missing permission on an own node as PERMISSION_DENIED without running the handler', async () => {
    const reader = await token('acme', ['compute:workflows:read']);
    const nodeId = await insertNode(scratch.db, 'acme', clock);
    const error = await failure(
      dispatcher().api.workflows.abort(reader, { tenantId: 'acme', nodeId, workflowId: 'w' }),
    );
    expect(error.code).toBe('PERMISSION_DENIED');
    expect(handled).toEqual([]);
  });

  it('honours compute:<area>:* and compute:* grants', async () => {
    const nodeId = await insertNode(scratch.db, 'acme', clock);
    const input = { tenantId: 'acme', nodeId, workflowId: 'w' };
    const { api } = dispatcher();
    await api.workflows.abort(await token('acme', ['compute:workflows:*']), input);
    await api.workflows.abort(await token('acme', ['compute:*']), input);
    const other = await failure(api.workflows.abort(await token('acme', ['compute:metal:*']), input));
    expect(handled).toEqual(['abort', 'abort']);
    expect(other.code).toBe('PERMISSION_DENIED');
  });

  it('refuses invalid input as INVALID_INPUT with the path of the offending field and every issue', async () => {
    const root = await token('root', ['compute:*']);
    const error = await failure(
      dispatcher().call('settings', 'tidy', root, {
        steps: [{ with: { port: 1 } }, { with: {} }, { with: { port: 'x' } }],
      }),
    );
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.details.path).toEqual(['steps', 1, 'with', 'port']);
    expect(error.details.issues?.map((issue) => issue.path)).toEqual([
      ['steps', 1, 'with', 'port'],
      ['steps', 2, 'with', 'port'],
    ]);
  });

  it.each([
    ['a NUL in an id', 'workflows', 'get', { tenantId: 'a\u0000b', nodeId: 'n', workflowId: 'w' }, ['tenantId']],
    [
      'a lone surrogate in an id',
      'workflows',
      'get',
      { tenantId: 'acme', nodeId: 'n\ud800', workflowId: 'w' },
      ['nodeId'],
    ],
    [
      'a NUL in an optional text',
      'workflows',
      'abort',
      { tenantId: 'acme', nodeId: 'n', workflowId: 'w', reason: '\u0000' },
      ['reason'],
    ],
    [
      'a NUL in a nested key',
      'settings',
      'tidy',
      { steps: [{ with: { port: 1, 'p\u0000': 2 } }] },
      ['steps', 0, 'with', 'p\u0000'],
    ],
  ])('refuses %s as INVALID_INPUT at its path before anything reads it', async (_name, group, method, input, path) => {
    const root = await token('root', ['compute:*']);
    const error = await failure(dispatcher().call(group, method, root, input));
    expect(error.toJSON()).toMatchObject({ code: 'INVALID_INPUT', details: { path } });
    expect(error.message).not.toContain('\u0000');
    expect(handled).toEqual([]);
  });

  it('authenticates, then validates input, then resolves the resource, then authorizes', async () => {
    const { api, call } = dispatcher();
    const unauthenticated = await failure(call('workflows', 'get', 'bc_nope', { bogus: true }));
    expect(unauthenticated.code).toBe('UNAUTHENTICATED');
    const noRights = await token('acme', ['compute:metal:read']);
    const invalid = await failure(call('workflows', 'get', noRights, { tenantId: 'acme', nodeId: 'missing' }));
    expect(invalid.code).toBe('INVALID_INPUT');
    const missing = await failure(
      api.workflows.get(noRights, { tenantId: 'acme', nodeId: 'missing', workflowId: 'w' }),
    );
    expect(missing.code).toBe('NOT_FOUND');
  });

  it('turns an unknown throw in a handler into INTERNAL without its message, keeping the cause', async () => {
    const root = await token('root', ['compute:*']);
    const nodeId = await insertNode(scratch.db, 'acme', clock);
    const error = await failure(
      dispatcher().call('workflows', 'crash', root, { tenantId: 'acme', nodeId, workflowId: 'w' }),
    );
    expect(error.toJSON()).toEqual({ code: 'INTERNAL', message: 'internal error', details: {} });
    expect((error.cause as Error).message).toContain('hunter2');
    expect(JSON.stringify(logged)).not.toContain('hunter2');
    expect(logged).toEqual([
      { level: 'error', message: 'API handler failed', fields: { method: 'workflows.crash', error: 'Error' } },
    ]);
  });

  it('passes a ComputeError from a handler through unchanged', async () => {
    const root = await token('root', ['compute:*']);
    const nodeId = await insertNode(scratch.db, 'acme', clock);
    const error = await failure(
      dispatcher().call('workflows', 'busy', root, { tenantId: 'acme', nodeId, workflowId: 'w' }),
    );
    expect(error.toJSON()).toEqual({ code: 'CONFLICT', message: 'the node has another active workflow', details: {} });
  });

  it('answers an unknown group or method as NOT_FOUND, including inherited object keys', async () => {
    const root = await token('root', ['compute:*']);
    const { call } = dispatcher();
    for (const [group, method] of [
      ['workflows', 'nope'],
      ['nope', 'get'],
      ['workflows', 'constructor'],
      ['__proto__', 'toString'],
    ] as const) {
      expect((await failure(call(group, method, root, {}))).code).toBe('NOT_FOUND');
    }
  });

  it('never puts the token into an error or a log line', async () => {
    const acme = await token('acme', ['compute:workflows:read']);
    await scratch.db.query('UPDATE credentials SET revoked_at = $1', [clock.now()]);
    const error = await failure(dispatcher().call('workflows', 'get', acme, {}));
    expect(error.code).toBe('UNAUTHENTICATED');
    expect(`${error.message}${JSON.stringify(error.toJSON())}${JSON.stringify(logged)}`).not.toContain(acme.slice(30));
  });

  it('refuses a malformed set of groups as INVALID_CONFIG', () => {
    const make = (groups: Record<string, unknown>) =>
      createApi({ groups: groups as never, makeContext: stubContext, sql: scratch.db });
    expect(() => make({ 'work.flows': workflows })).toThrowError(expect.objectContaining({ code: 'INVALID_CONFIG' }));
    expect(() => make({ jobs: workflows })).toThrowError(expect.objectContaining({ code: 'INVALID_CONFIG' }));
    expect(() => make({ jobs: { run: { permission: 'compute:jobs:run' } } })).toThrowError(
      expect.objectContaining({ code: 'INVALID_CONFIG', details: { path: ['jobs', 'run', 'input'] } }),
    );
  });
});
