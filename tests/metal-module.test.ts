import {
  type ApiClient,
  betterCompute,
  type Compute,
  ComputeError,
  definePlugin,
  field,
  manifest,
  type PkiPort,
  type SecretBroker,
} from 'better-compute/core';
import { inputJsonSchema, listApiMethods } from 'better-compute/core/kernel';
import {
  decideRequest,
  type MachineView,
  type MetalApi,
  metal,
  metalFindings,
  NODE_STATES,
  type NodeState,
  type SitesApi,
} from 'better-compute/metal';
import { defineProfile, defineStep, provisionModule, stepNotReady } from 'better-compute/provision';
import { createFakeClock, insertNode, insertSite, settle } from 'better-compute/testkit';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { apiError, tokenFor } from './support/api';
import { BACKENDS, type ScratchDatabase } from './support/databases';

// metal(): the module, its lifecycle carried out by the API and the `metal` reconciler, the `metal` and `sites` API
// groups and the findings, on stub phase profiles (one control-plane step each, scripted per phase by the test).

type Script = 'ok' | 'fail' | 'wait';
const script: Record<string, Script> = {};

const phaseStep = defineStep({
  id: 'mtest.phase',
  runsOn: 'control-plane',
  timeout: '1h',
  retrySafe: true,
  input: manifest({ phase: field.string() }),
  async run(input) {
    const behaviour = script[input.phase] ?? 'ok';
    if (behaviour === 'fail') throw new ComputeError('DRIVER_ERROR', `the BMC did not answer (${input.phase})`);
    if (behaviour === 'wait') throw stepNotReady(60_000);
    return { phase: input.phase };
  },
});

const PHASE_IDS = {
  enrolling: 'mtest.enroll',
  inspecting: 'mtest.inspect',
  commissioning: 'mtest.commission',
  releasing: 'mtest.release',
  retiring: 'mtest.retire',
  adopting: 'mtest.adopt',
} as const;

const stubProfiles = [
  ...Object.entries(PHASE_IDS).map(([phase, id]) =>
    defineProfile({ id, version: 1, target: 'metal', steps: [{ use: 'mtest.phase', with: { phase } }] }),
  ),
  defineProfile({
    id: 'mtest.deploy',
    version: 1,
    target: 'metal',
    steps: [{ use: 'mtest.phase', with: { phase: 'deploying' } }],
  }),
];

const TABLES =
  'metal_machines, metal_macs, workflow_steps, workflows, profiles, commands, work_items, events, ' +
  'agent_sessions, nodes, sites, credentials';

let macCounter = 0;
const nextMac = () => {
  macCounter += 1;
  const hex = macCounter.toString(16).padStart(6, '0');
  return `0c:42:a1:${hex.slice(0, 2)}:${hex.slice(2, 4)}:${hex.slice(4, 6)}`;
};

describe.each(BACKENDS)('metal() on $name', ({ create }) => {
  let scratch: ScratchDatabase;
  let compute: Compute;
  const clock = createFakeClock();
  const vault = new Map<string, string>();
  const issued: unknown[] = [];
  const secrets: SecretBroker = {
    put: async (_tenantId, value) => {
      const ref = `sec_test${vault.size + 1}_${macCounter}`;
      vault.set(ref, value);
      return ref;
    },
    resolve: async (ref) => vault.get(ref) ?? '',
    delete: async (ref) => {
      vault.delete(ref);
    },
  };
  const pki: PkiPort = {
    issueJoinToken: async (_tx, input) => {
      issued.push(input);
      return { id: `tok_test${issued.length}`, token: `site-secret-${issued.length}` };
    },
  };
  let api: ApiClient<{ metal: MetalApi; sites: SitesApi }>;
  let root: string;
  let siteId: string;

  beforeAll(async () => {
    scratch = await create();
    const bareMetal = metal({ profiles: PHASE_IDS });
    compute = await betterCompute({
      database: scratch.db,
      clock,
      secrets,
      pki,
      modules: [provisionModule({ steps: [phaseStep], profiles: stubProfiles, modules: [bareMetal] }), bareMetal],
    });
    api = compute.api as unknown as ApiClient<{ metal: MetalApi; sites: SitesApi }>;
  });
  afterAll(async () => {
    await compute?.close();
    await scratch?.drop();
  });
  beforeEach(async () => {
    await scratch.db.query(`TRUNCATE ${TABLES} CASCADE`);
    for (const key of Object.keys(script)) delete script[key];
    vault.clear();
    issued.length = 0;
    root = await tokenFor(scratch.db, clock, 'root', ['compute:metal:*', 'compute:sites:*']);
    siteId = await insertSite(scratch.db, { name: 'fra1' }, clock);
  });

  const drive = () => settle(compute, { clock });
  const enroll = (extra: Record<string, unknown> = {}, token = root) =>
    api.metal.enroll(token, {
      tenantId: 'root',
      siteId,
      bmc: { address: `10.0.${macCounter % 200}.${(macCounter % 250) + 1}`, driver: 'redfish' },
      macs: [nextMac()],
      ...extra,
    } as Parameters<typeof api.metal.enroll>[1]);
  const get = (nodeId: string) => api.metal.get(root, { tenantId: 'root', nodeId });
  const events = async (nodeId: string) =>
    (
      await scratch.db.query<{ type: string }>('SELECT type FROM events WHERE subject = $1 ORDER BY seq', [
        `node/${nodeId}`,
      ])
    ).rows.map((r) => r.type);
  const workflowsOf = async (nodeId: string) =>
    (
      await scratch.db.query<{ profile_id: string; owner: string; state: string }>(
        'SELECT profile_id, owner, state FROM workflows WHERE node_id = $1 ORDER BY created_at, id',
        [nodeId],
      )
    ).rows;
  /** Runs due work (no clock moves) until `done` holds, at most ten passes. */
  const runUntil = async (done: () => Promise<boolean>) => {
    for (let i = 0; i < 10 && !(await done()); i += 1) await compute.runDueWork();
    expect(await done()).toBe(true);
  };
  const stepInFlight = (nodeId: string) => async () => (await get(nodeId)).workflow?.step != null;
  /** An enrolled machine driven to `available`. */
  const available = async (extra: Record<string, unknown> = {}) => {
    const machine = await enroll(extra);
    await drive();
    expect((await get(machine.nodeId)).state).toBe('available');
    return machine.nodeId;
  };

  it('is a module with id metal, listed in modules and in provisionModule({ modules }), that needs provision', async () => {
    const bareMetal = metal();
    expect(bareMetal.id).toBe('metal');
    expect(bareMetal.dependsOn).toEqual(['provision']);
    expect(bareMetal.commandKinds.map((kind) => kind.name)).toContain('driver.invoke');
    expect(Object.keys(bareMetal.reconcilers)).toEqual(['metal']);
    expect(Object.keys(bareMetal.api)).toEqual(['metal', 'sites', 'batches']);
    // Every method's input has a JSON Schema for the OpenAPI document, with its documented fields.
    for (const [group, name, method] of listApiMethods(bareMetal.api)) {
      const schema = inputJsonSchema(method.input) as { properties?: Record<string, unknown> };
      expect(Object.keys(schema.properties ?? {}), `${group}.${name}`).toContain('tenantId');
    }
    const enrollSchema = inputJsonSchema(bareMetal.api.metal.enroll.input) as { properties: Record<string, unknown> };
    expect(Object.keys(enrollSchema.properties)).toEqual(
      expect.arrayContaining(['siteId', 'bmc', 'macs', 'labels', 'pool', 'holdAfter']),
    );
    expect(bareMetal.phaseProfiles).toMatchObject({ enrolling: 'metal.enroll', releasing: 'metal.release' });
    expect(metal({ profiles: { inspecting: 'x.inspect' } }).phaseProfiles.inspecting).toBe('x.inspect');
    expect(() => metal({ profiles: { deploying: 'x' } as never })).toThrowError(
      expect.objectContaining({ code: 'INVALID_CONFIG', details: { path: ['profiles', 'deploying'] } }),
    );
    await expect(betterCompute({ database: scratch.db, clock, modules: [metal()] })).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
    });
  });

  it("works as the steps-and-profiles page's compute.ts: listed in modules and in provisionModule({ modules })", async () => {
    const renderIso = defineStep({
      id: 'autoinstall.renderIso',
      runsOn: 'control-plane',
      timeout: '5m',
      retrySafe: false,
      input: manifest({}),
      async run() {
        return { url: 'https://cache.site-a/autoinstall/x.iso' };
      },
    });
    const ubuntu = defineProfile({
      id: 'ubuntu-24.04-autoinstall',
      version: 1,
      target: 'metal',
      role: 'host',
      steps: [{ use: 'autoinstall.renderIso' }],
    });
    const acmeAutoinstall = definePlugin({ id: 'acme-autoinstall', extensions: [renderIso], profiles: [ubuntu] });
    const bareMetal = metal();
    const provisionWithPlugin = provisionModule({ modules: [bareMetal, acmeAutoinstall] });
    const sample = await betterCompute({
      database: scratch.db,
      clock,
      modules: [bareMetal, provisionWithPlugin],
      plugins: [acmeAutoinstall],
    });
    try {
      const sampleApi = sample.api as unknown as ApiClient<{ metal: MetalApi }>;
      // The shipped enroll profile runs: metal's own steps and profiles reached the engine through the module.
      const machine = await sampleApi.metal.enroll(root, {
        tenantId: 'root',
        siteId,
        bmc: { address: '10.7.7.7', driver: 'redfish' },
        macs: [nextMac()],
      });
      expect(machine).toMatchObject({ state: 'enrolling', workflow: { profileId: 'metal.enroll' } });
      expect(provisionWithPlugin.engine.profiles).toBeDefined();
      expect(Object.keys(sample.registry.apiGroups)).toEqual(expect.arrayContaining(['metal', 'sites', 'workflows']));
    } finally {
      await sample.close();
    }
  });

  it('enrolls a machine through enrolling, inspecting and commissioning to available without polling', async () => {
    const machine = await enroll({ labels: { rack: 'r12' }, pool: 'gpu-a', name: 'gpu-001' });
    expect(machine).toMatchObject({ state: 'enrolling', held: false, enrolling: true, pool: 'gpu-a', name: 'gpu-001' });
    expect(machine.workflow).toMatchObject({ profileId: 'mtest.enroll', state: 'pending' });
    await drive();
    const seen = await get(machine.nodeId);
    expect(seen).toMatchObject({ state: 'available', workflow: null, lastError: null, phase: null, enrolling: false });
    expect(seen.labels).toEqual({ rack: 'r12' });
    expect(await events(machine.nodeId)).toEqual([
      'metal.node.enrolling',
      'metal.node.inspecting',
      'metal.node.commissioning',
      'metal.node.available',
    ]);
    const workflows = await workflowsOf(machine.nodeId);
    expect(workflows.map((w) => [w.profile_id, w.owner, w.state])).toEqual([
      ['mtest.enroll', 'metal', 'succeeded'],
      ['mtest.inspect', 'metal', 'succeeded'],
      ['mtest.commission', 'metal', 'succeeded'],
    ]);
    // Nothing is left queued: the machine moved because each workflow's end queued metal, not because metal polled.
    const { rows } = await scratch.db.query("SELECT kind, key FROM work_items WHERE kind = 'metal'");
    expect(rows).toEqual([]);
  });

  it('moves a machine on under running workers: the reconciler runs in a worker, woken by the workflow end', async () => {
    const bare = metal({ profiles: PHASE_IDS });
    const live = await betterCompute({
      database: scratch.db,
      modules: [provisionModule({ steps: [phaseStep], profiles: stubProfiles, modules: [bare] }), bare],
      workers: { pollMs: 25 },
    });
    try {
      const liveApi = live.api as unknown as ApiClient<{ metal: MetalApi }>;
      await live.startWorkers(1);
      const machine = await liveApi.metal.enroll(root, {
        tenantId: 'root',
        siteId,
        bmc: { address: '10.8.8.8', driver: 'ipmi' },
        macs: [nextMac()],
      });
      let state = machine.state;
      for (let i = 0; i < 200 && state !== 'available'; i += 1) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        state = (await liveApi.metal.get(root, { tenantId: 'root', nodeId: machine.nodeId })).state;
      }
      expect(state).toBe('available');
      expect(await events(machine.nodeId)).toEqual([
        'metal.node.enrolling',
        'metal.node.inspecting',
        'metal.node.commissioning',
        'metal.node.available',
      ]);
    } finally {
      await live.close();
    }
  });

  it('deploys, releases, inspects, commissions and retires through the API, each as a fresh metal workflow', async () => {
    const nodeId = await available();
    const deploying = await api.metal.deploy(root, {
      tenantId: 'root',
      nodeId,
      profileId: 'mtest.deploy',
      image: 'ubuntu@24.04',
      userData: '#cloud-config\npassword: hunter2\n',
    });
    expect(deploying).toMatchObject({
      state: 'deploying',
      deploy: { profileId: 'mtest.deploy', image: 'ubuntu@24.04', userData: true },
    });
    await drive();
    expect((await get(nodeId)).state).toBe('deployed');
    // The user data is kept (sealed, by reference) while the deploy request lives: a failed deploy's recover needs it.
    const userDataRefs = () => [...vault].filter(([, value]) => value.includes('hunter2')).map(([ref]) => ref);
    expect(userDataRefs()).toHaveLength(1);
    await api.metal.release(root, { tenantId: 'root', nodeId });
    await drive();
    expect(await get(nodeId)).toMatchObject({ state: 'available', deploy: null });
    // Available again, the request is gone, and so is its user data secret.
    expect(userDataRefs()).toEqual([]);
    await api.metal.inspect(root, { tenantId: 'root', nodeId });
    await drive();
    expect((await get(nodeId)).state).toBe('available');
    await api.metal.commission(root, { tenantId: 'root', nodeId });
    await drive();
    expect((await get(nodeId)).state).toBe('available');
    const macs = (await get(nodeId)).macs;
    await api.metal.retire(root, { tenantId: 'root', nodeId });
    await drive();
    expect((await get(nodeId)).state).toBe('retired');
    expect((await workflowsOf(nodeId)).slice(3).map((w) => w.profile_id)).toEqual([
      'mtest.deploy',
      'mtest.release',
      'mtest.inspect',
      'mtest.commission',
      'mtest.retire',
    ]);
    expect((await events(nodeId)).slice(4)).toEqual([
      'metal.node.deploying',
      'metal.node.deployed',
      'metal.node.releasing',
      'metal.node.available',
      'metal.node.inspecting',
      'metal.node.available',
      'metal.node.commissioning',
      'metal.node.available',
      'metal.node.retiring',
      'metal.node.retired',
    ]);
    // The user data never reached a table: only its reference, and a retired machine's MACs may enroll again.
    const dump = await scratch.db.query<{ t: string }>(
      "SELECT concat_ws(' ', (SELECT string_agg(t::text, ' ') FROM metal_machines t), (SELECT string_agg(e::text, ' ') FROM events e)) AS t",
    );
    expect(dump.rows[0]?.t).not.toContain('hunter2');
    const again = await api.metal.enroll(root, {
      tenantId: 'root',
      siteId,
      bmc: { address: '10.9.9.9', driver: 'ipmi' },
      macs: macs,
    });
    expect(again.macs).toEqual(macs);
  });

  it("a retired machine frees its BMC address in its site: the same hardware enrolls again, a live one's stays CONFLICT", async () => {
    const bmc = { address: '10.5.5.5', driver: 'ipmi' };
    const macs = [nextMac()];
    const first = await available({ bmc, macs });
    // While the machine is not retired its address is taken (even by a request with other MACs).
    expect(await apiError(enroll({ bmc }))).toMatchObject({ code: 'CONFLICT', details: { path: ['bmc', 'address'] } });
    await api.metal.retire(root, { tenantId: 'root', nodeId: first });
    await drive();
    expect((await get(first)).state).toBe('retired');
    const again = await enroll({ bmc, macs });
    expect(again).toMatchObject({ state: 'enrolling', bmc: { address: '10.5.5.5' }, macs });
    expect(again.nodeId).not.toBe(first);
    // The retired machine keeps its record; the new one holds the address now.
    expect((await get(first)).bmc).toMatchObject({ address: '10.5.5.5' });
    expect(await apiError(enroll({ bmc }))).toMatchObject({ code: 'CONFLICT', details: { path: ['bmc', 'address'] } });
    // The database agrees: a second live machine at the address violates the partial unique index.
    const row = await scratch.db.query('SELECT * FROM metal_machines WHERE node_id = $1', [again.nodeId]);
    const error = await scratch.db
      .query(
        `INSERT INTO metal_machines (node_id, tenant_id, site_id, bmc_address, bmc_driver, created_at, updated_at)
         VALUES ('node_dup', 'root', $1, '10.5.5.5', 'ipmi', $2, $2)`,
        [siteId, (row.rows[0] as { created_at: Date }).created_at],
      )
      .catch((e: unknown) => e);
    expect(String(error)).toMatch(/metal_machines_bmc_uq|unique/);
  });

  it('adopts a running machine straight to deployed', async () => {
    const adopted = await api.metal.adopt(root, {
      tenantId: 'root',
      siteId,
      bmc: { address: '10.1.1.1', driver: 'ipmi' },
      macs: [nextMac()],
    });
    expect(adopted).toMatchObject({ state: 'adopting', workflow: { profileId: 'mtest.adopt' } });
    await drive();
    expect((await get(adopted.nodeId)).state).toBe('deployed');
    expect(await events(adopted.nodeId)).toEqual(['metal.node.adopting', 'metal.node.deployed']);
  });

  it('refuses every request a state does not accept with INVALID_STATE naming the state, writing nothing', async () => {
    const machines: Partial<Record<NodeState, string>> = {};
    machines.available = await available();
    machines.deployed = await available();
    await api.metal.deploy(root, { tenantId: 'root', nodeId: machines.deployed, profileId: 'mtest.deploy' });
    machines.retired = await available();
    await api.metal.retire(root, { tenantId: 'root', nodeId: machines.retired });
    script.inspecting = 'fail';
    machines.failed = (await enroll()).nodeId;
    await drive();
    delete script.inspecting;
    // Last, and never driven: its enroll workflow has not run yet.
    machines.enrolling = (await enroll()).nodeId;
    const verbs = ['inspect', 'commission', 'release', 'retire', 'recover', 'abort'] as const;
    for (const [state, nodeId] of Object.entries(machines) as [NodeState, string][]) {
      const before = await get(nodeId);
      expect(before.state, nodeId).toBe(state);
      for (const verb of verbs) {
        let legal = true;
        try {
          decideRequest({ state }, verb);
        } catch {
          legal = false;
        }
        if (legal) continue;
        const error = await apiError(api.metal[verb](root, { tenantId: 'root', nodeId }));
        expect(error, `${verb} in ${state}`).toMatchObject({
          code: 'INVALID_STATE',
          details: { reason: 'illegal-move', state, verb },
        });
        expect(error.message).toContain(`'${state}'`);
      }
      if (state !== 'available') {
        const error = await apiError(api.metal.deploy(root, { tenantId: 'root', nodeId, profileId: 'mtest.deploy' }));
        expect(error).toMatchObject({ code: 'INVALID_STATE', details: { state } });
      }
      expect(await get(nodeId)).toEqual(before);
    }
    expect(Object.keys(machines).sort()).toEqual(
      NODE_STATES.filter((state) => ['available', 'deployed', 'retired', 'failed', 'enrolling'].includes(state)).sort(),
    );
  });

  it('fails a machine whose workflow fails, keeping its error, and recover runs that phase again to go on', async () => {
    script.commissioning = 'fail';
    const machine = await enroll();
    await drive();
    const failed = await get(machine.nodeId);
    expect(failed).toMatchObject({
      state: 'failed',
      phase: 'commissioning',
      enrolling: true,
      workflow: null,
      lastError: { code: 'DRIVER_ERROR', stepId: 'main.1', phase: 'commissioning' },
    });
    expect(failed.lastError?.message).toContain('the BMC did not answer (commissioning)');
    expect((await events(machine.nodeId)).at(-1)).toBe('metal.node.failed');
    const findings = await metalFindings(compute.context);
    expect(findings.find((f) => f.id === 'metal-failed')).toMatchObject({
      severity: 'warning',
      details: { count: 1, machines: [{ nodeId: machine.nodeId, failedFrom: 'commissioning' }] },
    });
    delete script.commissioning;
    const recovering = await api.metal.recover(root, { tenantId: 'root', nodeId: machine.nodeId });
    expect(recovering).toMatchObject({
      state: 'commissioning',
      lastError: null,
      workflow: { profileId: 'mtest.commission' },
    });
    await drive();
    expect((await get(machine.nodeId)).state).toBe('available');
    expect(await metalFindings(compute.context)).toEqual([]);
  });

  it('fails a machine whose next phase cannot start (a missing profile), and recover starts that phase', async () => {
    const broken = metal({ profiles: { ...PHASE_IDS, commissioning: 'mtest.missing' } });
    const other = await betterCompute({
      database: scratch.db,
      clock,
      modules: [provisionModule({ steps: [phaseStep], profiles: stubProfiles, modules: [broken] }), broken],
    });
    try {
      const otherApi = other.api as unknown as ApiClient<{ metal: MetalApi }>;
      const machine = await otherApi.metal.enroll(root, {
        tenantId: 'root',
        siteId,
        bmc: { address: '10.6.6.6', driver: 'ipmi' },
        macs: [nextMac()],
      });
      await settle(other, { clock });
      expect(await get(machine.nodeId)).toMatchObject({
        state: 'failed',
        phase: 'commissioning',
        enrolling: true,
        workflow: null,
        lastError: { code: 'NOT_FOUND', workflowId: null, phase: 'commissioning' },
      });
      expect((await workflowsOf(machine.nodeId)).map((w) => w.profile_id)).toEqual(['mtest.enroll', 'mtest.inspect']);
      expect(await api.metal.recover(root, { tenantId: 'root', nodeId: machine.nodeId })).toMatchObject({
        state: 'commissioning',
      });
      await drive();
      expect((await get(machine.nodeId)).state).toBe('available');
    } finally {
      await other.close();
    }
  });

  it('aborts the active workflow and fails the machine at once; recover deploys it again', async () => {
    const nodeId = await available();
    script.deploying = 'wait';
    const deploying = await api.metal.deploy(root, {
      tenantId: 'root',
      nodeId,
      profileId: 'mtest.deploy',
      profileVersion: 1,
    });
    await runUntil(stepInFlight(nodeId));
    const workflowId = deploying.workflow?.id as string;
    expect((await get(nodeId)).workflow).toMatchObject({
      id: workflowId,
      step: { stepId: 'main.1', action: 'mtest.phase' },
    });
    // The port aborts in the caller's transaction: rolled back with it, the workflow runs on.
    await expect(
      scratch.db.transaction(async (tx) => {
        await compute.context.workflows?.abort(tx, { workflowId: deploying.workflow?.id as string, reason: 'no' });
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect((await get(nodeId)).workflow).toMatchObject({ state: 'running' });
    const aborted = await api.metal.abort(root, { tenantId: 'root', nodeId, reason: 'wrong image' });
    expect(aborted).toMatchObject({
      state: 'failed',
      phase: 'deploying',
      lastError: { code: 'ABORTED', message: 'wrong image', workflowId, phase: 'deploying' },
    });
    await drive();
    const { rows } = await scratch.db.query<{ state: string; cancel_reason: string }>(
      'SELECT state, cancel_reason FROM workflows WHERE id = $1',
      [workflowId],
    );
    expect(rows[0]).toEqual({ state: 'cancelled', cancel_reason: 'wrong image' });
    // The workflow's end reached metal, which left the failed machine where the abort put it.
    expect((await get(nodeId)).state).toBe('failed');
    expect(await apiError(api.metal.abort(root, { tenantId: 'root', nodeId }))).toMatchObject({
      code: 'INVALID_STATE',
      details: { state: 'failed' },
    });
    delete script.deploying;
    expect(await api.metal.recover(root, { tenantId: 'root', nodeId })).toMatchObject({
      state: 'deploying',
      deploy: { profileId: 'mtest.deploy', profileVersion: 1 },
    });
    await drive();
    expect((await get(nodeId)).state).toBe('deployed');
  });

  it('retires a failed machine as it is, and a held one', async () => {
    script.enrolling = 'fail';
    const failed = await enroll();
    await drive();
    delete script.enrolling;
    const held = await enroll({ holdAfter: 'enrolling' });
    await drive();
    expect((await get(failed.nodeId)).state).toBe('failed');
    expect((await get(held.nodeId)).held).toBe(true);
    for (const nodeId of [failed.nodeId, held.nodeId]) {
      expect(await api.metal.retire(root, { tenantId: 'root', nodeId })).toMatchObject({
        state: 'retiring',
        held: false,
        lastError: null,
        workflow: { profileId: 'mtest.retire' },
      });
    }
    await drive();
    expect((await get(failed.nodeId)).state).toBe('retired');
    expect((await get(held.nodeId)).state).toBe('retired');
    expect(await metalFindings(compute.context)).toEqual([]);
  });

  it('decides concurrent requests on one machine one after the other: one deploy wins, the other is INVALID_STATE', async () => {
    const nodeId = await available();
    const outcomes = await Promise.allSettled([
      api.metal.deploy(root, { tenantId: 'root', nodeId, profileId: 'mtest.deploy' }),
      api.metal.deploy(root, { tenantId: 'root', nodeId, profileId: 'mtest.deploy' }),
      api.metal.retire(root, { tenantId: 'root', nodeId }),
    ]);
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected') expect(outcome.reason).toMatchObject({ code: 'INVALID_STATE' });
    }
    expect(await workflowsOf(nodeId)).toHaveLength(4);
    const mac = nextMac();
    const enrolls = await Promise.allSettled([enroll({ macs: [mac] }), enroll({ macs: [mac] })]);
    expect(enrolls.map((o) => o.status).sort()).toEqual(['fulfilled', 'rejected']);
    const refused = enrolls.find((o) => o.status === 'rejected') as PromiseRejectedResult;
    expect(refused.reason).toMatchObject({ code: 'CONFLICT' });
  });

  it('refuses abort on a machine in a phase without an active workflow', async () => {
    script.inspecting = 'wait';
    const machine = await enroll();
    await runUntil(stepInFlight(machine.nodeId));
    expect((await get(machine.nodeId)).state).toBe('inspecting');
    await scratch.db.query('UPDATE metal_machines SET workflow_id = NULL WHERE node_id = $1', [machine.nodeId]);
    expect(await apiError(api.metal.abort(root, { tenantId: 'root', nodeId: machine.nodeId }))).toMatchObject({
      code: 'INVALID_STATE',
      details: { reason: 'illegal-move', verb: 'abort' },
    });
  });

  it('holds an enroll after enrolling or inspecting until inspect or commission continues it', async () => {
    const first = await enroll({ holdAfter: 'enrolling' });
    clock.advance(1_000);
    const second = await enroll({ holdAfter: 'inspecting' });
    await drive();
    expect(await get(first.nodeId)).toMatchObject({ state: 'enrolling', held: true, workflow: null });
    expect(await get(second.nodeId)).toMatchObject({ state: 'inspecting', held: true, workflow: null });
    const { items } = await api.metal.list(root, { tenantId: 'root' });
    expect(items.map((m) => [m.nodeId, m.held])).toEqual([
      [second.nodeId, true],
      [first.nodeId, true],
    ]);
    expect(await metalFindings(compute.context)).toEqual([]);
    expect((await events(first.nodeId)).at(-1)).toBe('metal.node.held');
    expect(await apiError(api.metal.commission(root, { tenantId: 'root', nodeId: first.nodeId }))).toMatchObject({
      code: 'INVALID_STATE',
      details: { state: 'enrolling', held: true },
    });
    expect(await apiError(api.metal.abort(root, { tenantId: 'root', nodeId: second.nodeId }))).toMatchObject({
      code: 'INVALID_STATE',
    });
    await api.metal.inspect(root, { tenantId: 'root', nodeId: first.nodeId });
    await api.metal.commission(root, { tenantId: 'root', nodeId: second.nodeId });
    await drive();
    expect(await get(first.nodeId)).toMatchObject({ state: 'available', held: false });
    expect(await get(second.nodeId)).toMatchObject({ state: 'available', held: false });
    expect(await events(first.nodeId)).toEqual([
      'metal.node.enrolling',
      'metal.node.held',
      'metal.node.inspecting',
      'metal.node.commissioning',
      'metal.node.available',
    ]);
  });

  it('reports a machine in a phase with no active workflow, or with an overdue step, as metal-stalled', async () => {
    script.inspecting = 'wait';
    const overdue = await enroll();
    const orphan = await enroll();
    await runUntil(stepInFlight(overdue.nodeId));
    await runUntil(stepInFlight(orphan.nodeId));
    expect((await get(overdue.nodeId)).workflow?.step).toMatchObject({ action: 'mtest.phase' });
    await scratch.db.query('UPDATE metal_machines SET workflow_id = NULL WHERE node_id = $1', [orphan.nodeId]);
    const early = await metalFindings(compute.context);
    expect(early.find((f) => f.id === 'metal-stalled')?.details).toMatchObject({
      count: 1,
      machines: [{ nodeId: orphan.nodeId, reason: 'no-active-workflow', state: 'inspecting' }],
    });
    // Past the step's deadline by more than five minutes, with no worker having looked.
    clock.advance(60 * 60_000 + 6 * 60_000);
    const late = await metalFindings(compute.context);
    const stalled = late.find((f) => f.id === 'metal-stalled')?.details as { count: number; machines: unknown[] };
    expect(stalled.count).toBe(2);
    expect(stalled.machines).toContainEqual(
      expect.objectContaining({ nodeId: overdue.nodeId, reason: 'step-overdue', stepId: 'main.1' }),
    );
  });

  it("answers NOT_FOUND for another tenant's machine and site, and lists only the tenant's machines", async () => {
    const nodeId = await available();
    const acme = await tokenFor(scratch.db, clock, 'acme', ['compute:metal:*', 'compute:sites:*']);
    const notFound = { code: 'NOT_FOUND', details: { path: ['nodeId'] } };
    for (const tenantId of ['root', 'acme']) {
      expect(await apiError(api.metal.get(acme, { tenantId, nodeId }))).toMatchObject(notFound);
      expect(await apiError(api.metal.deploy(acme, { tenantId, nodeId, profileId: 'mtest.deploy' }))).toMatchObject(
        notFound,
      );
      expect(await apiError(api.metal.retire(acme, { tenantId, nodeId }))).toMatchObject(notFound);
      expect(
        await apiError(
          api.metal.enroll(acme, { tenantId, siteId, bmc: { address: '10.2.2.2', driver: 'ipmi' }, macs: [nextMac()] }),
        ),
      ).toMatchObject({ code: 'NOT_FOUND', details: { path: ['siteId'] } });
      expect(await apiError(api.sites.joinToken(acme, { tenantId, siteId }))).toMatchObject({
        code: 'NOT_FOUND',
        details: { path: ['siteId'] },
      });
    }
    expect(await api.metal.list(acme, { tenantId: 'acme' })).toEqual({ items: [], nextCursor: null });
    expect(await apiError(api.metal.list(acme, { tenantId: 'root' }))).toMatchObject({ code: 'NOT_FOUND' });
    // A node that is not a metal machine is NOT_FOUND too.
    const plainNode = await insertNode(scratch.db, { siteId }, clock);
    expect(await apiError(api.metal.get(root, { tenantId: 'root', nodeId: plainNode }))).toMatchObject(notFound);
    expect(await apiError(api.metal.inspect(root, { tenantId: 'root', nodeId: plainNode }))).toMatchObject(notFound);
    // And a read credential cannot manage.
    const reader = await tokenFor(scratch.db, clock, 'root', ['compute:metal:read']);
    expect((await api.metal.get(reader, { tenantId: 'root', nodeId })).state).toBe('available');
    expect(await apiError(api.metal.retire(reader, { tenantId: 'root', nodeId }))).toMatchObject({
      code: 'PERMISSION_DENIED',
      details: { permission: 'compute:metal:manage' },
    });
  });

  it('lists newest first with filters by state, site, pool and label selector, a limit and a cursor', async () => {
    const otherSite = await insertSite(scratch.db, { name: 'ams1' }, clock);
    const ids: string[] = [];
    for (let i = 0; i < 7; i += 1) {
      clock.advance(1_000);
      const machine = await enroll({
        ...(i % 2 === 0 ? { pool: 'even' } : {}),
        ...(i === 6 ? { siteId: otherSite } : {}),
        labels: i < 3 ? { 'gpu.model': 'H100', nvswitch: 'true' } : { 'gpu.model': 'A100' },
      });
      ids.push(machine.nodeId);
    }
    const newest = [...ids].reverse();
    const all = (await api.metal.list(root, { tenantId: 'root' })).items.map((m) => m.nodeId);
    expect(all).toEqual(newest);
    const pages: string[][] = [];
    let cursor: string | undefined;
    do {
      const page = await api.metal.list(root, { tenantId: 'root', limit: 3, ...(cursor ? { cursor } : {}) });
      pages.push(page.items.map((m) => m.nodeId));
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    expect(pages).toEqual([newest.slice(0, 3), newest.slice(3, 6), newest.slice(6)]);
    const ofList = async (filter: Record<string, unknown>) =>
      (await api.metal.list(root, { tenantId: 'root', ...filter })).items.map((m) => m.nodeId);
    expect(await ofList({ pool: 'even' })).toEqual(newest.filter((id) => ids.indexOf(id) % 2 === 0));
    expect(await ofList({ siteId: otherSite })).toEqual([ids[6]]);
    expect(await ofList({ selector: 'nvswitch && gpu.model=H100' })).toEqual(newest.slice(4));
    expect(await ofList({ selector: '!nvswitch' })).toEqual(newest.slice(0, 4));
    expect(await ofList({ selector: 'gpu.model!=H100' })).toEqual(newest.slice(0, 4));
    expect(await ofList({ state: 'enrolling' })).toEqual(newest);
    expect(await ofList({ state: 'available' })).toEqual([]);
    await drive();
    expect(await ofList({ state: 'available', selector: 'gpu.model=A100' })).toEqual(newest.slice(0, 4));
    for (const [input, path] of [
      [{ limit: 101 }, ['limit']],
      [{ limit: 0 }, ['limit']],
      [{ cursor: 'bm90IGEgY3Vyc29y' }, ['cursor']],
      [{ selector: 'a &&' }, ['selector']],
      [{ selector: '   ' }, ['selector']],
      [{ state: 'sleeping' }, ['state']],
    ] as const) {
      expect(
        await apiError(api.metal.list(root, { tenantId: 'root', ...input } as never)),
        JSON.stringify(input),
      ).toMatchObject({
        code: 'INVALID_INPUT',
        details: { path },
      });
    }
  });

  it('refuses bad enroll input at its path and a MAC or BMC already enrolled with CONFLICT, writing nothing', async () => {
    const taken = nextMac();
    await enroll({ macs: [taken], bmc: { address: '10.3.3.3', driver: 'redfish' } });
    const count = async () =>
      Number(
        (
          await scratch.db.query<{ n: string }>(
            'SELECT (SELECT count(*) FROM nodes) + (SELECT count(*) FROM metal_machines) + (SELECT count(*) FROM metal_macs) AS n',
          )
        ).rows[0]?.n,
      );
    const before = await count();
    const cases: [Record<string, unknown>, string, (string | number)[]][] = [
      [{ macs: [nextMac(), 'zz:00:00:00:00:00'] }, 'INVALID_INPUT', ['macs', 1]],
      [{ macs: ['0c:42:a1:ff:ff:01', '0C:42:A1:FF:FF:01'] }, 'INVALID_INPUT', ['macs', 1]],
      [{ macs: [] }, 'INVALID_INPUT', ['macs']],
      [{ macs: [nextMac(), taken] }, 'CONFLICT', ['macs', 1]],
      [{ bmc: { address: '10.3.3.3', driver: 'redfish' } }, 'CONFLICT', ['bmc', 'address']],
      [{ bmc: { address: 'http://10.3.3.4', driver: 'redfish' } }, 'INVALID_INPUT', ['bmc', 'address']],
      [{ bmc: { address: '10.3.3.4:99999', driver: 'redfish' } }, 'INVALID_INPUT', ['bmc', 'address']],
      [{ bmc: { address: '10.3.3.4', driver: 'Redfish!' } }, 'INVALID_INPUT', ['bmc', 'driver']],
      [{ bmc: { address: '10.3.3.4', driver: 'ipmi', username: 'admin' } }, 'INVALID_INPUT', ['bmc', 'password']],
      [{ labels: { 'Bad Key': 'x' } }, 'INVALID_INPUT', ['labels', 'Bad Key']],
      [{ holdAfter: 'deploying' }, 'INVALID_INPUT', ['holdAfter']],
      [{ name: 'a\u0000b' }, 'INVALID_INPUT', ['name']],
    ];
    for (const [extra, code, path] of cases) {
      const error = await apiError(enroll(extra));
      expect(error, JSON.stringify(extra)).toMatchObject({ code, details: { path } });
    }
    expect(await count()).toBe(before);
    expect(vault.size).toBe(0);
  });

  it('stores BMC credentials through ctx.secrets and keeps only the reference', async () => {
    const machine = await enroll({
      bmc: { address: '10.4.4.4', driver: 'ipmi', username: 'admin', password: 's3cret!' },
    });
    expect(machine.bmc).toEqual({ address: '10.4.4.4', driver: 'ipmi', hasCredential: true });
    const { rows } = await scratch.db.query<{ ref: string }>(
      "SELECT bmc_credential_ref #>> '{}' AS ref FROM metal_machines WHERE node_id = $1",
      [machine.nodeId],
    );
    expect(JSON.parse(vault.get(rows[0]?.ref as string) as string)).toEqual({ username: 'admin', password: 's3cret!' });
    const dump = await scratch.db.query<{ t: string }>(
      "SELECT (SELECT string_agg(t::text, ' ') FROM metal_machines t) || (SELECT string_agg(e::text, ' ') FROM events e) AS t",
    );
    expect(dump.rows[0]?.t).not.toContain('s3cret!');
    // Without a secret broker, credentials are refused before anything is written.
    const bare = metal({ profiles: PHASE_IDS });
    const noSecrets = await betterCompute({
      database: scratch.db,
      clock,
      modules: [provisionModule({ steps: [phaseStep], profiles: stubProfiles, modules: [bare] }), bare],
    });
    const plain = noSecrets.api as unknown as ApiClient<{ metal: MetalApi; sites: SitesApi }>;
    const error = await apiError(
      plain.metal.enroll(root, {
        tenantId: 'root',
        siteId,
        bmc: { address: '10.4.4.5', driver: 'ipmi', username: 'admin', password: 'x' },
        macs: [nextMac()],
      }),
    );
    expect(error).toMatchObject({ code: 'INVALID_CONFIG' });
    expect(await apiError(plain.sites.joinToken(root, { tenantId: 'root', siteId }))).toMatchObject({
      code: 'INVALID_CONFIG',
    });
    await noSecrets.close();
  });

  it('sets labels, creates sites and mints a site agent join token returned once', async () => {
    const nodeId = await available();
    const labelled = await api.metal.setLabels(root, { tenantId: 'root', nodeId, labels: { rack: 'r7' } });
    expect(labelled.labels).toEqual({ rack: 'r7' });
    expect(await apiError(api.metal.setLabels(root, { tenantId: 'root', nodeId, labels: { '': 'x' } }))).toMatchObject({
      code: 'INVALID_INPUT',
    });
    const site = await api.sites.create(root, { tenantId: 'root', name: 'ams2' });
    expect(site).toMatchObject({ tenantId: 'root', name: 'ams2' });
    expect(site.id).toMatch(/^site_/);
    expect(await apiError(api.sites.create(root, { tenantId: 'root', name: 'ams2' }))).toMatchObject({
      code: 'CONFLICT',
      details: { path: ['name'] },
    });
    const minted = await api.sites.joinToken(root, { tenantId: 'root', siteId: site.id });
    expect(minted).toMatchObject({ tokenId: 'tok_test1', token: 'site-secret-1', siteId: site.id, maxUses: 1 });
    expect(issued).toEqual([{ tenantId: 'root', role: 'site', siteId: site.id, ttlSeconds: 3600, maxUses: 1 }]);
    const dump = await scratch.db.query<{ t: string }>("SELECT string_agg(e::text, ' ') AS t FROM events e");
    expect(dump.rows[0]?.t).not.toContain('site-secret-1');
    expect(
      await apiError(api.sites.joinToken(root, { tenantId: 'root', siteId: site.id, ttlSeconds: 10 })),
    ).toMatchObject({
      code: 'INVALID_INPUT',
      details: { path: ['ttlSeconds'] },
    });
  });
});

export type { MachineView };
