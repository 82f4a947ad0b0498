import { betterCompute, definePlugin, manifest } from 'better-compute/core';
import { createPgliteDatabase } from 'better-compute/core/pglite';
import {
  defineProfile,
  defineStep,
  getWorkflow,
  provisionModule,
  type WorkflowPreload,
} from 'better-compute/provision';
import { createFakeClock, insertNode, settle } from 'better-compute/testkit';
import { describe, expect, it } from 'vitest';
import { errorOf } from './support/errors';

const renderIso = defineStep({
  id: 'acme.renderIso',
  runsOn: 'control-plane',
  timeout: '5m',
  retrySafe: true,
  input: manifest({}),
  async run(_input, ctx) {
    return { url: `https://cache.site-a/autoinstall/${ctx.idempotencyKey}.iso` };
  },
});
const acmeProfile = defineProfile({
  id: 'acme-install',
  version: 1,
  target: 'metal',
  steps: [{ use: 'acme.renderIso' }],
});

// The steps provision registers as its own before any it is given.
const BUILTIN_STEP_IDS = ['userdata.render', 'wait.agentJoined', 'wait.observedGeneration'];

describe('provisionModule', () => {
  it('borrows the steps and profiles of a plugin that registers them itself, as the docs wire it', async () => {
    const acme = definePlugin({ id: 'acme-autoinstall', extensions: [renderIso], profiles: [acmeProfile] });
    const provision = provisionModule({ modules: [acme] });
    // Only provision's built-in steps: the plugin registers its own.
    expect(provision.extensions?.map((e) => (e as { id: string }).id)).toEqual(BUILTIN_STEP_IDS);
    const clock = createFakeClock();
    const compute = await betterCompute({
      database: await createPgliteDatabase(),
      clock,
      modules: [provision],
      plugins: [acme],
    });
    try {
      const nodeId = await insertNode(compute.database, {}, clock);
      const { id } = await compute.database.transaction((tx) =>
        compute.context.workflows!.start(tx, { tenantId: 'root', profileId: 'acme-install', nodeId }),
      );
      await settle(compute, { clock });
      const wf = await getWorkflow(compute.database, { workflowId: id });
      expect(wf).toMatchObject({
        state: 'succeeded',
        steps: [{ action: 'acme.renderIso', result: { url: expect.stringContaining(id) } }],
      });
    } finally {
      await compute.database.close();
      await compute.close();
    }
  });

  it("hands a plugin's workflow preload, read by the worker's claim at the claim's now, to its step's run", async () => {
    const nodePreload = {
      extension: 'workflow-preload' as const,
      id: 'acme.node',
      sql: ({ workflow, now }: { workflow: string; now: string }) =>
        `(SELECT json_build_object('nodeId', n.id, 'at', ${now}) FROM nodes n WHERE n.id = ${workflow}.node_id)`,
    } satisfies WorkflowPreload;
    const readsPreload = defineStep({
      id: 'acme.readsPreload',
      runsOn: 'control-plane',
      timeout: '1m',
      retrySafe: true,
      input: manifest({}),
      async run(_input, ctx) {
        return { seen: ctx.preloads?.reads['acme.node'] ?? 'none', commands: ctx.preloads?.commands?.length ?? -1 };
      },
    });
    const profile = defineProfile({
      id: 'acme-preload',
      version: 1,
      target: 'metal',
      steps: [{ use: 'acme.readsPreload' }],
    });
    const acme = definePlugin({ id: 'acme-preload', extensions: [readsPreload, nodePreload], profiles: [profile] });
    const clock = createFakeClock();
    const compute = await betterCompute({
      database: await createPgliteDatabase(),
      clock,
      modules: [provisionModule({ modules: [acme] })],
      plugins: [acme],
    });
    try {
      const nodeId = await insertNode(compute.database, {}, clock);
      const { id } = await compute.database.transaction((tx) =>
        compute.context.workflows!.start(tx, { tenantId: 'root', profileId: 'acme-preload', nodeId }),
      );
      await settle(compute, { clock });
      const wf = await getWorkflow(compute.database, { workflowId: id });
      expect(wf.state).toBe('succeeded');
      const result = wf.steps[0]?.result as { seen: { nodeId: string; at: string }; commands: number };
      // The step the pass started had sent nothing; the read is the plugin's, at the worker's (fake) clock.
      expect(result.commands).toBe(0);
      expect(result.seen.nodeId).toBe(nodeId);
      expect(new Date(result.seen.at).getTime()).toBe(clock.now().getTime());
    } finally {
      await compute.database.close();
      await compute.close();
    }
  });

  it('refuses a workflow preload with a malformed id, an id taken, or an sql that returns nothing', () => {
    const preload = (id: string, sql: () => unknown = () => '(SELECT 1)') =>
      ({ extension: 'workflow-preload', id, sql }) as unknown as WorkflowPreload;
    const cases: [unknown[], (string | number)[]][] = [
      [[preload('Acme Node')], ['modules', 0, 'extensions', 0, 'id']],
      [
        [preload('acme.node'), preload('acme.node')],
        ['modules', 0, 'extensions', 1, 'id'],
      ],
      [[preload('acme.node', () => '  ')], ['modules', 0, 'extensions', 0, 'sql']],
      [
        [
          preload('acme.node', () => {
            throw new Error('no');
          }),
        ],
        ['modules', 0, 'extensions', 0, 'sql'],
      ],
    ];
    for (const [extensions, path] of cases) {
      const plugin = definePlugin({ id: 'acme', extensions: extensions as never });
      expect(errorOf(() => provisionModule({ modules: [plugin] }))).toMatchObject({
        code: 'INVALID_CONFIG',
        details: { path },
      });
    }
  });

  it('registers its own steps as its extensions, so the registry refuses the same step listed by a plugin', async () => {
    const provision = provisionModule({ steps: [renderIso] });
    expect(provision.extensions?.slice(BUILTIN_STEP_IDS.length)).toEqual([renderIso]);
    const plugin = definePlugin({ id: 'acme', extensions: [renderIso] });
    const error = await betterCompute({ modules: [provision], plugins: [plugin] }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'INVALID_CONFIG' });
  });

  it('refuses a step id seen twice in its one namespace with INVALID_CONFIG and the path', () => {
    const twin = defineStep({ ...renderIso, timeout: '1m' });
    expect(errorOf(() => provisionModule({ steps: [renderIso, twin] }))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['steps', 1] },
    });
    const plugin = definePlugin({ id: 'acme', extensions: [twin] });
    expect(errorOf(() => provisionModule({ steps: [renderIso], modules: [plugin] }))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['modules', 0, 'extensions', 0] },
    });
  });

  it('refuses a step that defineStep did not make, and a profile shipped twice', () => {
    const fake = { extension: 'step', id: 'acme.fake' } as never;
    expect(errorOf(() => provisionModule({ steps: [fake] }))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['steps', 0] },
    });
    expect(errorOf(() => provisionModule({ profiles: [acmeProfile, acmeProfile] }))).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['profiles', 1] },
    });
  });

  it('provides ctx.workflows to every module, and refuses a second module providing it', async () => {
    const provision = provisionModule();
    const error = await betterCompute({
      modules: [provision, { ...provisionModule(), id: 'provision-two' } as never],
    }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'INVALID_CONFIG' });
  });
});
