import { betterCompute, definePlugin, manifest } from 'better-compute/core';
import { createPgliteDatabase } from 'better-compute/core/pglite';
import { defineProfile, defineStep, getWorkflow, provisionModule } from 'better-compute/provision';
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
