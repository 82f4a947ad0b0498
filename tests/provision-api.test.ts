import type { ApiClient } from 'better-compute/core';
import {
  abortWorkflow,
  defineProfile,
  type ProfileDefinition,
  type ProvisionApi,
  storeProfile,
} from 'better-compute/provision';
import { insertNode } from 'better-compute/testkit';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { apiError, post, provisionApiOf, tokenFor } from './support/api';
import { BACKENDS, type ScratchDatabase } from './support/databases';
import { createEngineLab, type EngineLab } from './support/engine-lab';

// The profiles and workflows API groups (workflows.md "The workflows API", steps-and-profiles.md "Profiles"), called
// through compute.api as users do, with one call over HTTP for the status mapping.

const shipped = [
  defineProfile({ id: 'lab-deploy', version: 1, target: 'metal', steps: [{ use: 'lab.noop' }] }),
  defineProfile({ id: 'lab-deploy', version: 2, target: 'metal', description: 'v2', steps: [{ use: 'lab.noop' }] }),
  defineProfile({ id: 'lab-inspect', version: 1, target: 'metal', role: 'host', steps: [{ use: 'lab.inspect' }] }),
];

type Draft = Omit<ProfileDefinition, 'version' | 'target'> & Partial<ProfileDefinition>;
const doc = (draft: Draft): ProfileDefinition => ({ version: 1, target: 'metal', ...draft });

const WORKFLOW_METHODS = ['list', 'get', 'abort', 'retry', 'pause', 'resume'] as const;
const PROFILE_METHODS = ['create', 'get', 'list', 'validate', 'render'] as const;

describe.each(BACKENDS)('the provision API on $name', ({ create }) => {
  let scratch: ScratchDatabase;
  let lab: EngineLab;
  let api: ApiClient<ProvisionApi>;

  beforeAll(async () => {
    scratch = await create();
    lab = await createEngineLab(scratch.db, { profiles: shipped });
    api = provisionApiOf(lab.compute);
  });
  afterAll(async () => {
    await lab?.close();
    await scratch?.drop();
  });
  beforeEach(async () => {
    await lab.reset();
  });

  const token = (tenantId: string, permissions: string[]) => tokenFor(lab.db, lab.clock, tenantId, permissions);
  const store = (tenantId: string, draft: Draft, isPublic = false) =>
    lab.db.transaction((tx) => storeProfile(tx, { tenantId, profile: doc(draft), public: isPublic }, lab.clock.now()));
  const startOn = (profileId: string, options: { nodeId?: string; tenantId?: string } = {}) =>
    lab.db.transaction(
      async (tx) =>
        (
          await lab.compute.context.workflows!.start(tx, {
            tenantId: options.tenantId ?? 'root',
            profileId,
            nodeId: options.nodeId ?? lab.nodeId,
          })
        ).id,
    );

  describe('workflows', () => {
    function callWorkflows(
      method: (typeof WORKFLOW_METHODS)[number],
      credential: string,
      input: Record<string, string>,
    ) {
      const { tenantId = '', nodeId = '', workflowId = '' } = input;
      if (method === 'list') return api.workflows.list(credential, { tenantId, nodeId });
      return api.workflows[method](credential, { tenantId, nodeId, workflowId });
    }

    it('decides every method on the node: get and list as read, the verbs as manage', async () => {
      await store('root', { id: 'lab-one', steps: [{ use: 'lab.noop' }] });
      const workflowId = await startOn('lab-one');
      const input = { tenantId: 'root', nodeId: lab.nodeId, workflowId };
      const reader = await token('root', ['compute:workflows:read']);
      const manager = await token('root', ['compute:workflows:manage']);
      const unrelated = await token('root', ['compute:profiles:*']);
      const required = {
        list: 'read',
        get: 'read',
        abort: 'manage',
        retry: 'manage',
        pause: 'manage',
        resume: 'manage',
      };
      for (const method of WORKFLOW_METHODS) {
        const permission = `compute:workflows:${required[method]}`;
        const without = required[method] === 'read' ? manager : reader;
        for (const credential of [without, unrelated]) {
          expect(await apiError(callWorkflows(method, credential, input)), method).toMatchObject({
            code: 'PERMISSION_DENIED',
            details: { permission },
          });
        }
        // With the permission the call is decided on its merits: a result or a state error, never a denial.
        const withIt = required[method] === 'read' ? reader : manager;
        const outcome = await callWorkflows(method, withIt, input).catch((error: { code: string }) => error);
        expect((outcome as { code?: string }).code, method).not.toBe('PERMISSION_DENIED');
      }
    });

    it("answers NOT_FOUND for another tenant's node and for a workflow that is not the node's", async () => {
      await store('root', { id: 'lab-one', steps: [{ use: 'lab.noop' }] });
      const workflowId = await startOn('lab-one');
      const acme = await token('acme', ['compute:workflows:*']);
      const nodeGone = { code: 'NOT_FOUND', message: 'compute-node not found', details: { path: ['nodeId'] } };
      for (const method of WORKFLOW_METHODS) {
        const asRoot = { tenantId: 'root', nodeId: lab.nodeId, workflowId };
        const asAcme = { tenantId: 'acme', nodeId: lab.nodeId, workflowId };
        expect((await apiError(callWorkflows(method, acme, asRoot))).toJSON(), method).toEqual(nodeGone);
        expect((await apiError(callWorkflows(method, acme, asAcme))).toJSON(), method).toEqual(nodeGone);
      }
      const root = await token('root', ['compute:workflows:*']);
      const otherNode = await insertNode(lab.db, { siteId: lab.siteId }, lab.clock);
      for (const method of WORKFLOW_METHODS.filter((m) => m !== 'list')) {
        const error = await apiError(callWorkflows(method, root, { tenantId: 'root', nodeId: otherNode, workflowId }));
        expect(error, method).toMatchObject({ code: 'NOT_FOUND', details: { path: ['workflowId'] } });
      }
      expect(await api.workflows.list(root, { tenantId: 'root', nodeId: otherNode })).toEqual({
        items: [],
        nextCursor: null,
      });
      // Root acts on every tenant, naming the tenant in the input.
      const acmeNode = await insertNode(lab.db, { tenantId: 'acme' }, lab.clock);
      await store('acme', { id: 'acme-one', steps: [{ use: 'lab.noop' }] });
      const acmeWorkflow = await startOn('acme-one', { tenantId: 'acme', nodeId: acmeNode });
      const seen = await api.workflows.get(root, { tenantId: 'acme', nodeId: acmeNode, workflowId: acmeWorkflow });
      expect(seen).toMatchObject({ id: acmeWorkflow, tenantId: 'acme', nodeId: acmeNode });
      expect(
        await apiError(api.workflows.get(root, { tenantId: 'root', nodeId: acmeNode, workflowId: acmeWorkflow })),
      ).toMatchObject({ code: 'NOT_FOUND', details: { path: ['nodeId'] } });
    });

    it('lists newest first in disjoint pages that cover every workflow, with an opaque cursor', async () => {
      await store('root', { id: 'lab-one', steps: [{ use: 'lab.noop' }] });
      const started: { id: string; tick: number }[] = [];
      for (let i = 0; i < 7; i += 1) {
        const id = await startOn('lab-one');
        await abortWorkflow(lab.compute.context, { workflowId: id }); // pending: cancelled at once
        started.push({ id, tick: Math.floor(i / 2) });
        if (i % 2 === 1) lab.clock.advance(1_000); // two per instant, so ties are broken by id
      }
      const newestFirst = [...started].sort((a, b) => b.tick - a.tick || (a.id < b.id ? 1 : -1)).map((w) => w.id);
      const reader = await token('root', ['compute:workflows:read']);
      const pages: string[][] = [];
      let cursor: string | undefined;
      do {
        const page = await api.workflows.list(reader, { tenantId: 'root', nodeId: lab.nodeId, limit: 3, cursor });
        pages.push(page.items.map((w) => w.id));
        for (const item of page.items) expect(item).toMatchObject({ state: 'cancelled', stepId: null });
        cursor = page.nextCursor ?? undefined;
      } while (cursor);
      expect(pages.map((p) => p.length)).toEqual([3, 3, 1]);
      expect(pages.flat()).toEqual(newestFirst);
      expect(new Set(pages.flat()).size).toBe(7);
      const all = await api.workflows.list(reader, { tenantId: 'root', nodeId: lab.nodeId });
      expect(all.items.map((w) => w.id)).toEqual(newestFirst);
      expect(all.nextCursor).toBeNull();
      expect(typeof all.items[0]?.createdAt).toBe('string');
    });

    it('returns 20 by default and refuses a limit over 100, a limit under 1 and a foreign cursor', async () => {
      await store('root', { id: 'lab-one', steps: [{ use: 'lab.noop' }] });
      for (let i = 0; i < 21; i += 1) {
        await abortWorkflow(lab.compute.context, { workflowId: await startOn('lab-one') });
      }
      const reader = await token('root', ['compute:workflows:read', 'compute:profiles:read']);
      const base = { tenantId: 'root', nodeId: lab.nodeId };
      const first = await api.workflows.list(reader, base);
      expect(first.items).toHaveLength(20);
      const rest = await api.workflows.list(reader, { ...base, cursor: first.nextCursor as string });
      expect(rest).toMatchObject({ items: [expect.anything()], nextCursor: null });
      expect(await api.workflows.list(reader, { ...base, limit: 100 })).toMatchObject({ nextCursor: null });
      for (const limit of [101, 0, 2.5]) {
        expect(await apiError(api.workflows.list(reader, { ...base, limit })), String(limit)).toMatchObject({
          code: 'INVALID_INPUT',
          details: { path: ['limit'] },
        });
      }
      const profilesCursor = (await api.profiles.list(reader, { tenantId: 'root', limit: 1 })).nextCursor as string;
      for (const cursor of ['not-a-cursor', profilesCursor]) {
        expect(await apiError(api.workflows.list(reader, { ...base, cursor }))).toMatchObject({
          code: 'INVALID_INPUT',
          details: { path: ['cursor'] },
        });
      }
    });

    it('gets the state, the step in flight and every step with its command, deadline, result and error', async () => {
      lab.nodeAgent.respond({ outcome: 'ignore' });
      await store('root', {
        id: 'lab-get',
        steps: [{ use: 'lab.noop', name: 'first' }, { use: 'lab.ping', with: { n: 1 } }, { use: 'lab.noop' }],
      });
      const workflowId = await startOn('lab-get');
      await lab.compute.runDueWork();
      await lab.nodeAgent.poll();
      const reader = await token('root', ['compute:workflows:read']);
      const wf = await api.workflows.get(reader, { tenantId: 'root', nodeId: lab.nodeId, workflowId });
      expect(wf).toMatchObject({
        id: workflowId,
        tenantId: 'root',
        nodeId: lab.nodeId,
        profileId: 'lab-get',
        profileVersion: 1,
        state: 'running',
        stepId: 'main.2',
        error: null,
        createdAt: lab.clock.now().toISOString(),
      });
      expect(wf.steps).toEqual([
        {
          stepId: 'main.1',
          phase: 'main',
          action: 'lab.noop',
          name: 'first',
          runsOn: 'control-plane',
          state: 'succeeded',
          attempt: 0,
          commandId: null,
          deadline: expect.any(String),
          startedAt: expect.any(String),
          finishedAt: expect.any(String),
          result: { ok: true, tag: null },
          error: null,
        },
        {
          stepId: 'main.2',
          phase: 'main',
          action: 'lab.ping',
          runsOn: 'node',
          state: 'waiting',
          attempt: 0,
          commandId: expect.stringMatching(/^cmd_/),
          deadline: new Date(lab.clock.now().getTime() + 5 * 60_000).toISOString(),
          startedAt: expect.any(String),
          finishedAt: null,
          result: null,
          error: null,
        },
        expect.objectContaining({ stepId: 'main.3', state: 'pending', deadline: null, startedAt: null }),
      ]);
      // The same document over HTTP: times are ISO strings either way.
      expect(JSON.parse(JSON.stringify(wf))).toEqual(wf);
    });

    it('aborts a running workflow with a reason, does nothing the second time, and refuses a succeeded one', async () => {
      lab.nodeAgent.respond({ outcome: 'silent' });
      await store('root', {
        id: 'lab-abort',
        steps: [{ use: 'lab.ping' }, { use: 'lab.noop' }],
        cleanup: [{ use: 'lab.noop', with: { tag: 'c' } }],
      });
      const workflowId = await startOn('lab-abort');
      await lab.compute.runDueWork();
      await lab.nodeAgent.poll();
      const manager = await token('root', ['compute:workflows:*']);
      const input = { tenantId: 'root', nodeId: lab.nodeId, workflowId };
      const aborted = await api.workflows.abort(manager, { ...input, reason: 'wrong image' });
      expect(aborted).toMatchObject({ state: 'cancelling', cancelReason: 'wrong image' });
      await lab.settle();
      const again = await api.workflows.abort(manager, { ...input, reason: 'second' });
      expect(again).toMatchObject({ state: 'cancelled', cancelReason: 'wrong image' });
      expect(again.steps.map((s) => `${s.stepId}:${s.state}`)).toEqual([
        'main.1:cancelled',
        'main.2:cancelled',
        'cleanup.1:succeeded',
      ]);
      expect(await apiError(api.workflows.abort(manager, { ...input, reason: 'x'.repeat(1025) }))).toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['reason'] },
      });

      lab.nodeAgent.respond({ outcome: 'succeed' });
      await store('root', { id: 'lab-done', steps: [{ use: 'lab.noop' }] });
      const done = await startOn('lab-done');
      await lab.settle();
      expect(await apiError(api.workflows.abort(manager, { ...input, workflowId: done }))).toMatchObject({
        code: 'INVALID_STATE',
      });
    });

    it('retries a failed workflow, CONFLICT while the node has another active workflow', async () => {
      lab.nodeAgent.respond({ outcome: 'fail', reason: 'disk busy' });
      await store('root', { id: 'lab-fails', steps: [{ use: 'lab.noop' }, { use: 'lab.ping' }] });
      await store('root', { id: 'lab-other', steps: [{ use: 'lab.noop' }] });
      const failed = await startOn('lab-fails');
      await lab.settle();
      const manager = await token('root', ['compute:workflows:*']);
      const input = { tenantId: 'root', nodeId: lab.nodeId, workflowId: failed };
      const seen = await api.workflows.get(manager, input);
      expect(seen).toMatchObject({ state: 'failed', error: { code: 'COMMAND_FAILED', stepId: 'main.2' } });
      expect(seen.steps[1]).toMatchObject({ state: 'failed', error: { code: 'COMMAND_FAILED' } });

      const other = await startOn('lab-other');
      expect(await apiError(api.workflows.retry(manager, input))).toMatchObject({ code: 'CONFLICT' });
      await abortWorkflow(lab.compute.context, { workflowId: other });
      expect(await apiError(api.workflows.retry(manager, { ...input, fromStep: 'cleanup.1' }))).toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['fromStep'] },
      });

      lab.nodeAgent.respond({ outcome: 'succeed' });
      const retried = await api.workflows.retry(manager, { ...input, fromStep: 'main.2' });
      expect(retried).toMatchObject({ state: 'running', error: null });
      expect(retried.steps.map((s) => `${s.stepId}:${s.state}:${s.attempt}`)).toEqual([
        'main.1:succeeded:0',
        'main.2:pending:1',
      ]);
      await lab.settle();
      expect(await api.workflows.get(manager, input)).toMatchObject({ state: 'succeeded' });
      expect(await apiError(api.workflows.retry(manager, input))).toMatchObject({ code: 'INVALID_STATE' });
    });

    it('pauses and resumes a running workflow, and refuses to pause one in its cleanup phase', async () => {
      lab.nodeAgent.respond({ outcome: 'ignore' });
      await store('root', { id: 'lab-pause', steps: [{ use: 'lab.ping' }, { use: 'lab.noop' }] });
      const workflowId = await startOn('lab-pause');
      const manager = await token('root', ['compute:workflows:manage']);
      const input = { tenantId: 'root', nodeId: lab.nodeId, workflowId };
      expect(await apiError(api.workflows.pause(manager, input))).toMatchObject({ code: 'INVALID_STATE' }); // pending
      await lab.compute.runDueWork();
      expect(await api.workflows.pause(manager, input)).toMatchObject({ state: 'paused', stepId: 'main.1' });
      expect(await apiError(api.workflows.pause(manager, input))).toMatchObject({ code: 'INVALID_STATE' });
      lab.nodeAgent.respond({ outcome: 'succeed' });
      await lab.settle();
      const resumed = await api.workflows.resume(manager, input);
      expect(resumed.state).toBe('running');
      expect(resumed.steps.map((s) => s.state)).toEqual(['succeeded', 'pending']);
      expect(await apiError(api.workflows.resume(manager, input))).toMatchObject({ code: 'INVALID_STATE' });
      await lab.settle();

      lab.nodeAgent.respond({ outcome: 'ignore' });
      await store('root', { id: 'lab-cleanup', steps: [{ use: 'lab.noop' }], cleanup: [{ use: 'lab.ping' }] });
      const cleaning = await startOn('lab-cleanup');
      await lab.compute.runDueWork();
      const inCleanup = { ...input, workflowId: cleaning };
      expect(await apiError(api.workflows.pause(manager, inCleanup))).toMatchObject({
        code: 'INVALID_STATE',
        details: { reason: 'cleanup' },
      });
    });

    it('serves workflows.get over HTTP with a bearer token and maps error codes to statuses', async () => {
      await store('root', { id: 'lab-http', steps: [{ use: 'lab.noop' }] });
      const workflowId = await startOn('lab-http');
      await lab.settle();
      const input = { tenantId: 'root', nodeId: lab.nodeId, workflowId };
      const root = await token('root', ['compute:workflows:*']);
      const ok = await post(lab.compute, 'workflows.get', root, input);
      expect(ok.status).toBe(200);
      expect(await ok.json()).toEqual(await api.workflows.get(root, input));

      const acme = await token('acme', ['compute:workflows:*']);
      const foreign = await post(lab.compute, 'workflows.get', acme, input);
      expect(foreign.status).toBe(404);
      expect(await foreign.json()).toEqual({
        code: 'NOT_FOUND',
        message: 'compute-node not found',
        details: { path: ['nodeId'] },
      });
      const denied = await post(lab.compute, 'workflows.get', await token('root', ['compute:profiles:read']), input);
      expect(denied.status).toBe(403);
      expect(await denied.json()).toMatchObject({ code: 'PERMISSION_DENIED' });
      const succeeded = await post(lab.compute, 'workflows.abort', root, input);
      expect(succeeded.status).toBe(409);
      expect(await succeeded.json()).toMatchObject({ code: 'INVALID_STATE' });
      const tooMany = await post(lab.compute, 'workflows.list', root, { ...input, limit: 101 });
      expect(tooMany.status).toBe(400);
      expect(await tooMany.json()).toMatchObject({ code: 'INVALID_INPUT', details: { path: ['limit'] } });
      expect((await post(lab.compute, 'workflows.get', 'bc_nope', input)).status).toBe(401);
    });
  });

  describe('profiles', () => {
    function callProfiles(method: (typeof PROFILE_METHODS)[number], credential: string, tenantId: string) {
      switch (method) {
        case 'create':
          return api.profiles.create(credential, { tenantId, profile: doc({ id: 'lab-perm', steps: [] }) });
        case 'get':
          return api.profiles.get(credential, { tenantId, profileId: 'lab-deploy' });
        case 'list':
          return api.profiles.list(credential, { tenantId });
        case 'validate':
          return api.profiles.validate(credential, { tenantId, profileId: 'lab-deploy' });
        case 'render':
          return api.profiles.render(credential, { tenantId, profileId: 'lab-deploy' });
      }
    }

    it('decides every method on the tenant: create as manage, the others as read', async () => {
      const reader = await token('root', ['compute:profiles:read']);
      const manager = await token('root', ['compute:profiles:manage']);
      for (const method of PROFILE_METHODS) {
        const manages = method === 'create';
        expect(await apiError(callProfiles(method, manages ? reader : manager, 'root')), method).toMatchObject({
          code: 'PERMISSION_DENIED',
          details: { permission: `compute:profiles:${manages ? 'manage' : 'read'}` },
        });
        await expect(callProfiles(method, manages ? manager : reader, 'root'), method).resolves.toBeDefined();
      }
    });

    it("answers NOT_FOUND for another tenant and for another tenant's private profile", async () => {
      const acme = await token('acme', ['compute:profiles:*']);
      await token('globex', ['compute:profiles:read']);
      for (const method of PROFILE_METHODS) {
        expect((await apiError(callProfiles(method, acme, 'root'))).toJSON(), method).toEqual({
          code: 'NOT_FOUND',
          message: 'compute-tenant not found',
          details: { path: ['tenantId'] },
        });
      }
      await store('globex', { id: 'globex-secret', steps: [{ use: 'lab.noop' }] });
      const hidden = { tenantId: 'acme', profileId: 'globex-secret' };
      // One call at a time: a second one made up front would reject unobserved while the first is awaited.
      for (const call of [() => api.profiles.get(acme, hidden), () => api.profiles.validate(acme, hidden)]) {
        expect(await apiError(call())).toMatchObject({ code: 'NOT_FOUND', details: { path: ['profileId'] } });
      }
      expect(await apiError(api.profiles.render(acme, hidden))).toMatchObject({ code: 'NOT_FOUND' });
      const { items } = await api.profiles.list(acme, { tenantId: 'acme', limit: 100 });
      expect(items.map((p) => p.id)).not.toContain('globex-secret');
      const globexNode = await insertNode(lab.db, { tenantId: 'globex' }, lab.clock);
      expect(
        await apiError(api.profiles.render(acme, { tenantId: 'acme', profileId: 'lab-deploy', nodeId: globexNode })),
      ).toMatchObject({ code: 'NOT_FOUND', message: 'compute-node not found', details: { path: ['nodeId'] } });
    });

    it('creates a version per tenant, replaces it until a workflow used it, then refuses with INVALID_STATE', async () => {
      const manager = await token('root', ['compute:profiles:*']);
      const draft = doc({ id: 'lab-created', steps: [{ use: 'lab.noop', with: { tag: 'a' } }] });
      const created = await api.profiles.create(manager, { tenantId: 'root', profile: draft });
      expect(created).toEqual({ tenantId: 'root', public: false, used: false, profile: draft });
      const replaced = { ...draft, steps: [{ use: 'lab.noop', with: { tag: 'b' } }] };
      await api.profiles.create(manager, { tenantId: 'root', profile: replaced });
      expect(await api.profiles.get(manager, { tenantId: 'root', profileId: 'lab-created' })).toEqual({
        tenantId: 'root',
        public: false,
        used: false,
        profile: replaced,
      });
      await startOn('lab-created');
      expect(await api.profiles.get(manager, { tenantId: 'root', profileId: 'lab-created' })).toMatchObject({
        used: true,
      });
      expect(await apiError(api.profiles.create(manager, { tenantId: 'root', profile: draft }))).toMatchObject({
        code: 'INVALID_STATE',
        details: { reason: 'profile-version-used' },
      });
      await expect(
        api.profiles.create(manager, { tenantId: 'root', profile: { ...draft, version: 2 } }),
      ).resolves.toMatchObject({ profile: { version: 2 } });
      const bad = { ...draft, id: 'lab-bad', steps: [{ use: 'lab.noop', timeout: 'soon' }] };
      expect(await apiError(api.profiles.create(manager, { tenantId: 'root', profile: bad }))).toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['steps', 0, 'timeout'] },
      });
    });

    it('lets only root credentials store a public profile', async () => {
      const acme = await token('acme', ['compute:profiles:*']);
      const globex = await token('globex', ['compute:profiles:read']);
      const root = await token('root', ['compute:profiles:*']);
      const profile = doc({ id: 'lab-shared', steps: [{ use: 'lab.noop' }] });
      expect(await apiError(api.profiles.create(acme, { tenantId: 'acme', profile, public: true }))).toMatchObject({
        code: 'PERMISSION_DENIED',
        details: { path: ['public'], reason: 'public-requires-root' },
      });
      await api.profiles.create(root, { tenantId: 'acme', profile, public: true });
      expect(await api.profiles.get(globex, { tenantId: 'globex', profileId: 'lab-shared' })).toMatchObject({
        tenantId: 'acme',
        public: true,
      });
    });

    it("gets the tenant's own profile, then a public stored one, then a shipped one, with NOT_FOUND paths", async () => {
      const acme = await token('acme', ['compute:profiles:read']);
      await token('globex', ['compute:profiles:read']);
      const get = (profileId: string, version?: number) =>
        api.profiles.get(acme, { tenantId: 'acme', profileId, ...(version === undefined ? {} : { version }) });
      expect(await get('lab-deploy')).toMatchObject({
        tenantId: 'builtin',
        public: true,
        used: false,
        profile: { id: 'lab-deploy', version: 2 },
      });
      await store('globex', { id: 'lab-deploy', description: 'globex' }, true);
      expect(await get('lab-deploy')).toMatchObject({ tenantId: 'globex', profile: { version: 1 } });
      await store('acme', { id: 'lab-deploy', description: 'acme' });
      expect(await get('lab-deploy')).toMatchObject({
        tenantId: 'acme',
        public: false,
        profile: { description: 'acme' },
      });
      expect(await get('lab-deploy', 2)).toMatchObject({ tenantId: 'builtin', profile: { version: 2 } });
      expect(await apiError(get('lab-deploy', 9))).toMatchObject({ code: 'NOT_FOUND', details: { path: ['version'] } });
      expect(await apiError(get('lab-nothing'))).toMatchObject({ code: 'NOT_FOUND', details: { path: ['profileId'] } });
    });

    it('lists what the tenant can use in a stable order, marking shadowed entries, in complete disjoint pages', async () => {
      const acme = await token('acme', ['compute:profiles:read', 'compute:workflows:read']);
      await token('globex', ['compute:profiles:read']);
      await store('globex', { id: 'lab-deploy' }, true);
      await store('globex', { id: 'lab-secret' });
      await store('acme', { id: 'lab-deploy' });
      await store('acme', { id: 'acme-only', version: 3, role: 'host' });
      const expected = [
        'acme-only@3 acme',
        'lab-deploy@2 builtin',
        'lab-deploy@1 acme',
        'lab-deploy@1 globex shadowed',
        'lab-deploy@1 builtin shadowed',
        'lab-inspect@1 builtin',
      ];
      const show = (p: { id: string; version: number; tenantId: string; shadowed: boolean }) =>
        `${p.id}@${p.version} ${p.tenantId}${p.shadowed ? ' shadowed' : ''}`;
      const all = await api.profiles.list(acme, { tenantId: 'acme' });
      expect(all.items.map(show)).toEqual(expected);
      expect(all.nextCursor).toBeNull();
      expect(all.items[0]).toEqual({
        tenantId: 'acme',
        id: 'acme-only',
        version: 3,
        public: false,
        used: false,
        shadowed: false,
        target: 'metal',
        mode: 'provision',
        role: 'host',
        description: null,
        createdAt: lab.clock.now().toISOString(),
        updatedAt: lab.clock.now().toISOString(),
      });
      expect(all.items[1]).toMatchObject({ public: true, description: 'v2', createdAt: null });

      const pages: string[][] = [];
      let cursor: string | undefined;
      do {
        const page = await api.profiles.list(acme, { tenantId: 'acme', limit: 2, cursor });
        pages.push(page.items.map(show));
        cursor = page.nextCursor ?? undefined;
      } while (cursor);
      expect(pages).toEqual([expected.slice(0, 2), expected.slice(2, 4), expected.slice(4)]);

      expect(await apiError(api.profiles.list(acme, { tenantId: 'acme', limit: 101 }))).toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['limit'] },
      });
      const acmeNode = await insertNode(lab.db, { tenantId: 'acme' }, lab.clock);
      await store('acme', { id: 'acme-a', steps: [{ use: 'lab.noop' }] });
      await abortWorkflow(lab.compute.context, {
        workflowId: await startOn('acme-a', { tenantId: 'acme', nodeId: acmeNode }),
      });
      await abortWorkflow(lab.compute.context, {
        workflowId: await startOn('acme-a', { tenantId: 'acme', nodeId: acmeNode }),
      });
      const workflowsCursor = (await api.workflows.list(acme, { tenantId: 'acme', nodeId: acmeNode, limit: 1 }))
        .nextCursor as string;
      expect(await apiError(api.profiles.list(acme, { tenantId: 'acme', cursor: workflowsCursor }))).toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['cursor'] },
      });
    });

    it('validates without throwing, listing every unresolved use and rejected with by its path', async () => {
      const reader = await token('root', ['compute:profiles:read']);
      const profile = doc({
        id: 'lab-bad',
        hostConfig: { units: [{ name: 'acme-unknown-unit' }] },
        steps: [
          { use: 'lab.nothing' },
          { use: 'lab.inspect', with: { port: 70000 } },
          { use: 'power.setPower', on: 'site' },
          { use: 'lab.noop', onFailure: { use: 'lab.missing' } },
        ],
        cleanup: [{ use: 'lab.noop', with: { tag: 5 } }],
      });
      const result = await api.profiles.validate(reader, { tenantId: 'root', profile });
      expect(result.valid).toBe(false);
      expect(result.issues.map((i) => i.path)).toEqual([
        ['steps', 0, 'use'],
        ['steps', 1, 'with', 'port'],
        ['steps', 2, 'use'],
        ['steps', 3, 'onFailure', 'use'],
        ['cleanup', 0, 'with', 'tag'],
        ['hostConfig', 'units', 0, 'name'],
      ]);
      for (const issue of result.issues) {
        expect(issue).toMatchObject({ code: 'INVALID_INPUT', message: expect.any(String) });
      }
      expect(result.issues[2]?.message).toContain('no driver is bound for power');

      // A document that is not a profile at all: the one issue checkProfile finds.
      const malformed = await api.profiles.validate(reader, {
        tenantId: 'root',
        profile: { ...profile, id: 'Bad Id' },
      });
      expect(malformed).toEqual({
        valid: false,
        issues: [{ path: ['id'], message: expect.any(String), code: 'INVALID_INPUT' }],
      });
      expect(await api.profiles.validate(reader, { tenantId: 'root', profile: 'nope' })).toMatchObject({
        valid: false,
        issues: [{ path: [] }],
      });

      await store('root', { id: 'lab-good', steps: [{ use: 'lab.inspect', with: { port: 22 } }] });
      expect(await api.profiles.validate(reader, { tenantId: 'root', profileId: 'lab-good' })).toEqual({
        valid: true,
        issues: [],
      });
      expect(await api.profiles.validate(reader, { tenantId: 'root', profileId: 'lab-deploy', version: 1 })).toEqual({
        valid: true,
        issues: [],
      });
      expect(await apiError(api.profiles.validate(reader, { tenantId: 'root', profileId: 'lab-none' }))).toMatchObject({
        code: 'NOT_FOUND',
        details: { path: ['profileId'] },
      });
      for (const input of [
        { tenantId: 'root' },
        { tenantId: 'root', profile, profileId: 'lab-good' },
        { tenantId: 'root', profile, version: 1 },
      ]) {
        expect(await apiError(api.profiles.validate(reader, input))).toMatchObject({
          code: 'INVALID_INPUT',
          details: { path: ['profileId'] },
        });
      }
    });

    it('renders the steps in run order, with willRun on a node’s labels and each driver operation’s binding', async () => {
      const reader = await token('root', ['compute:profiles:read']);
      await store('root', {
        id: 'lab-render',
        drivers: { power: { name: 'redfish', insecure: false } },
        steps: [
          { use: 'lab.mount', name: 'mount', when: 'rack=r2' },
          {
            use: 'lab.ping',
            when: 'gpu.model=H100',
            with: { n: 2 },
            onFailure: { use: 'power.setPower', on: 'site', with: { action: 'reset' } },
          },
          { use: 'lab.reboot', await: 'rejoin', timeout: '20m', retries: 1 },
          { use: 'lab.noop', when: '!mig.capable' },
        ],
        acceptance: [{ use: 'lab.noop', with: { tag: 'accept' } }],
        cleanup: [{ use: 'lab.noop', with: { tag: 'c' } }],
      });
      const labels = { rack: 'r1', 'gpu.model': 'H100', 'mig.capable': 'true' };
      const nodeId = await insertNode(lab.db, { siteId: lab.siteId, labels }, lab.clock);
      const plan = await api.profiles.render(reader, { tenantId: 'root', profileId: 'lab-render', nodeId });
      expect(plan).toMatchObject({
        tenantId: 'root',
        profileId: 'lab-render',
        version: 1,
        nodeId,
        commandKinds: ['driver.invoke', 'lab.ping', 'lab.reboot'],
      });
      const rows = plan.steps.map((s) => `${s.stepId} ${s.action} ${s.runsOn} ${s.willRun ? 'runs' : 'skipped'}`);
      expect(rows).toEqual([
        'main.1 lab.mount control-plane skipped',
        'main.2 lab.ping node runs',
        'main.3 lab.reboot node runs',
        'main.4 lab.noop control-plane skipped',
        'main.5 lab.noop control-plane runs',
        'main.2.on-failure power.setPower site runs',
        'main.1.cleanup.1 lab.noop control-plane skipped',
        'main.1.cleanup.2 lab.noop control-plane skipped',
        'cleanup.1 lab.noop control-plane runs',
      ]);
      const byId = new Map(plan.steps.map((s) => [s.stepId, s]));
      expect(byId.get('main.2')).toEqual({
        stepId: 'main.2',
        phase: 'main',
        parentStepId: null,
        name: null,
        action: 'lab.ping',
        resolution: 'step',
        runsOn: 'node',
        on: null,
        commandKind: 'lab.ping',
        timeoutMs: 5 * 60_000,
        retries: 0,
        onFailure: 'step',
        await: null,
        when: 'gpu.model=H100',
        with: { n: 2 },
        driver: null,
        willRun: true,
      });
      expect(byId.get('main.2.on-failure')).toMatchObject({
        phase: 'on-failure',
        on: 'site',
        parentStepId: 'main.2',
        resolution: 'driver',
        commandKind: 'driver.invoke',
        timeoutMs: 10 * 60_000,
        driver: { name: 'redfish', insecure: false },
        with: { action: 'reset' },
      });
      expect(byId.get('main.3')).toMatchObject({ await: 'rejoin', timeoutMs: 20 * 60_000, retries: 1 });
      expect(byId.get('main.1')).toMatchObject({ name: 'mount', when: 'rack=r2', willRun: false });

      const withoutNode = await api.profiles.render(reader, { tenantId: 'root', profileId: 'lab-render' });
      expect(withoutNode.nodeId).toBeNull();
      expect(withoutNode.steps.map((s) => s.willRun)).toEqual(plan.steps.map(() => null));
      const inline = await api.profiles.render(reader, {
        tenantId: 'root',
        profile: doc({ id: 'lab-inline', steps: [{ use: 'lab.noop' }] }),
      });
      expect(inline).toMatchObject({ tenantId: null, profileId: 'lab-inline', steps: [{ stepId: 'main.1' }] });

      expect(
        await apiError(api.profiles.render(reader, { tenantId: 'root', profileId: 'lab-render', nodeId: 'node_nope' })),
      ).toMatchObject({ code: 'NOT_FOUND', details: { path: ['nodeId'] } });
      const unresolved = doc({
        id: 'lab-unresolved',
        steps: [{ use: 'lab.nothing' }, { use: 'lab.inspect', with: { port: 0 } }],
      });
      expect(await apiError(api.profiles.render(reader, { tenantId: 'root', profile: unresolved }))).toMatchObject({
        code: 'INVALID_INPUT',
        details: {
          path: ['steps', 0, 'use'],
          issues: [{ path: ['steps', 0, 'use'] }, { path: ['steps', 1, 'with', 'port'] }],
        },
      });
      const malformed = { ...unresolved, version: 0 };
      expect(await apiError(api.profiles.render(reader, { tenantId: 'root', profile: malformed }))).toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['version'], issues: [{ path: ['version'] }] },
      });
    });
  });
});
