import { randomBytes } from 'node:crypto';
import {
  type ApiClient,
  betterCompute,
  type Compute,
  type ComputeModule,
  field,
  manifest,
  type QuorumPort,
} from 'better-compute/core';
import { type BatchesApi, type BatchView, type MetalApi, metal } from 'better-compute/metal';
import { generateSigningKeyPair, pki, signToBase64Url } from 'better-compute/pki';
import { defineProfile, defineStep, provisionModule } from 'better-compute/provision';
import { createFakeAgent, createFakeClock, type FakeAgent, insertSite, settle } from 'better-compute/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiError, tokenFor } from './support/api';
import { type ScratchDatabase, scratchPglite } from './support/databases';

// Item 8 of the metal issue: with approver keys configured, metal creates each workflow's destructive batch from the
// kinds the workflow records, the workflow is held until a threshold of approvers signed it (visible in metal.get and
// metal.list), and then proceeds by itself; a rejected or expired batch fails the machine in its phase.

const wipeKind = { name: 'qtest.wipe', payload: manifest({}), destructive: true };
const probe: ComputeModule = { id: 'qtest', commandKinds: [wipeKind] };

const phaseStep = defineStep({
  id: 'qtest.phase',
  runsOn: 'control-plane',
  timeout: '1h',
  retrySafe: true,
  input: manifest({ phase: field.string() }),
  async run(input) {
    return { phase: input.phase };
  },
});
const wipeStep = defineStep({
  id: 'qtest.wipe',
  runsOn: 'node',
  command: 'qtest.wipe',
  timeout: '1h',
  retrySafe: false,
  input: manifest({}),
});

const PHASES = {
  enrolling: 'qtest.enroll',
  inspecting: 'qtest.inspect',
  commissioning: 'qtest.commission',
  releasing: 'qtest.release',
  retiring: 'qtest.retire',
  adopting: 'qtest.adopt',
} as const;

const profiles = [
  ...Object.entries(PHASES).map(([phase, id]) =>
    defineProfile({ id, version: 1, target: 'metal', steps: [{ use: 'qtest.phase', with: { phase } }] }),
  ),
  // The deploy sends one destructive command, after a step that sends nothing.
  defineProfile({
    id: 'qtest.deploy',
    version: 1,
    target: 'metal',
    steps: [{ use: 'qtest.phase', with: { phase: 'deploying' } }, { use: 'qtest.wipe' }],
  }),
];

const keys = { alice: generateSigningKeyPair('ed25519'), bob: generateSigningKeyPair('es256') };
const approvers = [
  { id: 'alice', publicKey: keys.alice.publicKeyPem },
  { id: 'bob', publicKey: keys.bob.publicKeyPem },
];
const sign = (who: keyof typeof keys, batch: Pick<BatchView, 'signingPayload'>) =>
  signToBase64Url(keys[who].privateKeyPem, new TextEncoder().encode(batch.signingPayload));

type Api = ApiClient<{ metal: MetalApi; batches: BatchesApi }>;

interface Site {
  scratch: ScratchDatabase;
  compute: Compute;
  api: Api;
  clock: ReturnType<typeof createFakeClock>;
  root: string;
  siteId: string;
  agents: FakeAgent[];
}

let macs = 0;

async function makeSite(options: { quorum?: 'on' | 'off' | 'absent' }): Promise<Site> {
  const scratch = await scratchPglite();
  const clock = createFakeClock();
  const security = pki({
    key: randomBytes(32).toString('hex'),
    clock,
    ...(options.quorum === 'on' ? { quorum: { approvers, threshold: 2 } } : {}),
  });
  const bareMetal = metal({ profiles: PHASES });
  const compute = await betterCompute({
    database: scratch.db,
    clock,
    modules: [
      security.module,
      probe,
      provisionModule({ steps: [phaseStep, wipeStep], profiles, modules: [bareMetal] }),
      bareMetal,
    ],
    pki: security.port(),
    secrets: security.secrets(scratch.db),
    ...(options.quorum === 'absent' ? {} : { quorum: security.quorum() }),
  });
  const root = await tokenFor(scratch.db, clock, 'root', ['compute:metal:*', 'compute:sites:*']);
  const siteId = await insertSite(scratch.db, { name: 'fra1' }, clock);
  return { scratch, compute, api: compute.api as unknown as Api, clock, root, siteId, agents: [] };
}

async function closeSite(site: Site | undefined) {
  await site?.compute.close();
  await site?.scratch.drop();
}

/** Drives everything due; the metal reconciler's wake-up at a batch's expiry does not keep it going. */
const drive = (site: Site) =>
  settle(site.compute, { clock: site.clock, agents: site.agents, idleKinds: ['core.expireCommands', 'metal'] });

/** An enrolled machine, available, with a node agent that answers every command. */
async function availableMachine(site: Site): Promise<string> {
  macs += 1;
  const machine = await site.api.metal.enroll(site.root, {
    tenantId: 'root',
    siteId: site.siteId,
    bmc: { address: `10.1.0.${macs}`, driver: 'redfish' },
    macs: [`0c:42:a1:10:00:${macs.toString(16).padStart(2, '0')}`],
  });
  const agent = createFakeAgent(site.compute, { nodeId: machine.nodeId, role: 'node' });
  await agent.connect();
  agent.respond({ outcome: 'succeed', result: { ok: true } });
  site.agents.push(agent);
  await drive(site);
  const view = await site.api.metal.get(site.root, { tenantId: 'root', nodeId: machine.nodeId });
  expect(view.state).toBe('available');
  expect(view.awaiting).toBeNull();
  return machine.nodeId;
}

const deploy = (site: Site, nodeId: string) =>
  site.api.metal.deploy(site.root, { tenantId: 'root', nodeId, profileId: 'qtest.deploy' });

async function wipes(site: Site, nodeId?: string) {
  const { rows } = await site.scratch.db.query<{ node_id: string; batch_id: string | null; state: string }>(
    `SELECT node_id, batch_id, state FROM commands WHERE kind = 'qtest.wipe' ${nodeId ? 'AND node_id = $1' : ''}`,
    nodeId ? [nodeId] : [],
  );
  return rows;
}

describe('metal under the quorum (two approvers, threshold two)', () => {
  let site: Site;
  beforeAll(async () => {
    site = await makeSite({ quorum: 'on' });
  });
  afterAll(() => closeSite(site));

  it('lets workflows that send nothing destructive run without a batch', async () => {
    const nodeId = await availableMachine(site);
    const { rows } = await site.scratch.db.query<{ batch_id: string | null; state: string }>(
      'SELECT batch_id, state FROM workflows WHERE node_id = $1',
      [nodeId],
    );
    expect(rows.length).toBeGreaterThanOrEqual(3);
    expect(rows.every((r) => r.batch_id === null && r.state === 'succeeded')).toBe(true);
    expect((await site.api.batches.list(site.root, { tenantId: 'root', nodeId })).items).toEqual([]);
  });

  it('holds a deploy until the second valid signature; replayed and forged signatures release nothing', async () => {
    const nodeId = await availableMachine(site);
    const other = await availableMachine(site);
    const now = site.clock.now();
    const deploying = await deploy(site, nodeId);
    await deploy(site, other);
    expect(deploying.state).toBe('deploying');
    expect(deploying.workflow).toMatchObject({ state: 'paused', held: true, step: null });
    const batchId = deploying.awaiting?.batchId as string;
    expect(deploying.awaiting).toEqual({
      batchId,
      state: 'pending',
      approvals: 0,
      threshold: 2,
      approvedBy: [],
      notAfter: new Date(now.getTime() + 24 * 60 * 60 * 1000).toISOString(),
    });
    expect(deploying.workflow?.batchId).toBe(batchId);

    // The batch is the workflow's recorded destructive kinds, on this node only.
    const batch = await site.api.batches.get(site.root, { tenantId: 'root', batchId });
    expect(batch).toMatchObject({
      tenantId: 'root',
      nodeIds: [nodeId],
      commandKinds: ['qtest.wipe'],
      state: 'pending',
      approvals: 0,
      threshold: 2,
      rejection: null,
    });
    const recorded = await site.scratch.db.query<{ command_kinds: string[] }>(
      "SELECT command_kinds FROM workflows WHERE node_id = $1 AND profile_id = 'qtest.deploy'",
      [nodeId],
    );
    expect(recorded.rows[0]?.command_kinds).toEqual(['qtest.wipe']);
    const otherBatch = (await site.api.metal.get(site.root, { tenantId: 'root', nodeId: other })).awaiting;
    expect(otherBatch?.batchId).not.toBe(batchId);

    // Waiting: the held workflow starts no step and sends nothing.
    await drive(site);
    expect(await wipes(site)).toEqual([]);
    const listed = await site.api.metal.list(site.root, { tenantId: 'root', state: 'deploying' });
    expect(listed.items.map((m) => [m.nodeId, m.awaiting?.approvals, m.awaiting?.threshold])).toEqual(
      expect.arrayContaining([
        [nodeId, 0, 2],
        [other, 0, 2],
      ]),
    );

    // One signature is not enough.
    const first = await site.api.batches.approve(site.root, {
      tenantId: 'root',
      batchId,
      approverId: 'alice',
      signature: sign('alice', batch),
    });
    expect(first).toMatchObject({ state: 'pending', approvals: 1, approvedBy: ['alice'] });
    await drive(site);
    expect(await wipes(site)).toEqual([]);
    expect((await site.api.metal.get(site.root, { tenantId: 'root', nodeId })).awaiting).toMatchObject({
      approvals: 1,
      threshold: 2,
    });

    // Bob's valid signature over the other batch, replayed here, and a forgery, are refused and count for nothing.
    const otherView = await site.api.batches.get(site.root, {
      tenantId: 'root',
      batchId: otherBatch?.batchId as string,
    });
    const replayed = await apiError(
      site.api.batches.approve(site.root, {
        tenantId: 'root',
        batchId,
        approverId: 'bob',
        signature: sign('bob', otherView),
      }),
    );
    expect(replayed).toMatchObject({ code: 'PERMISSION_DENIED', details: { reason: 'signature-invalid' } });
    const forged = await apiError(
      site.api.batches.approve(site.root, {
        tenantId: 'root',
        batchId,
        approverId: 'bob',
        signature: sign('alice', batch),
      }),
    );
    expect(forged).toMatchObject({ code: 'PERMISSION_DENIED', details: { reason: 'signature-invalid' } });
    const stranger = generateSigningKeyPair('ed25519');
    const unknown = await apiError(
      site.api.batches.approve(site.root, {
        tenantId: 'root',
        batchId,
        approverId: 'mallory',
        signature: signToBase64Url(stranger.privateKeyPem, new TextEncoder().encode(batch.signingPayload)),
      }),
    );
    expect(unknown).toMatchObject({ code: 'PERMISSION_DENIED', details: { reason: 'approver-unknown' } });
    const twice = await apiError(
      site.api.batches.approve(site.root, {
        tenantId: 'root',
        batchId,
        approverId: 'alice',
        signature: sign('alice', batch),
      }),
    );
    expect(twice).toMatchObject({ code: 'CONFLICT', details: { reason: 'approval-duplicate' } });
    await drive(site);
    expect(await wipes(site)).toEqual([]);
    expect((await site.api.batches.get(site.root, { tenantId: 'root', batchId })).approvals).toBe(1);

    // The second valid signature releases this node, and only this one.
    const second = await site.api.batches.approve(site.root, {
      tenantId: 'root',
      batchId,
      approverId: 'bob',
      signature: sign('bob', batch),
    });
    expect(second).toMatchObject({ state: 'approved', approvals: 2, approvedBy: ['alice', 'bob'] });
    await drive(site);
    expect(await wipes(site, nodeId)).toEqual([{ node_id: nodeId, batch_id: batchId, state: 'succeeded' }]);
    expect(await wipes(site, other)).toEqual([]);
    const deployed = await site.api.metal.get(site.root, { tenantId: 'root', nodeId });
    expect(deployed).toMatchObject({ state: 'deployed', awaiting: null, lastError: null });
    const otherNow = await site.api.metal.get(site.root, { tenantId: 'root', nodeId: other });
    expect(otherNow).toMatchObject({ state: 'deploying', awaiting: { approvals: 0 } });
    const events = await site.scratch.db.query<{ type: string }>(
      'SELECT type FROM events WHERE subject = $1 ORDER BY seq',
      [`node/${nodeId}`],
    );
    expect(events.rows.map((r) => r.type)).toContain('metal.batch.approved');
  });

  it('fails the machine in its phase when its batch is rejected; recover waits on a fresh batch', async () => {
    const nodeId = await availableMachine(site);
    const { awaiting } = await deploy(site, nodeId);
    const batchId = awaiting?.batchId as string;
    const batch = await site.api.batches.get(site.root, { tenantId: 'root', batchId });
    await site.api.batches.approve(site.root, {
      tenantId: 'root',
      batchId,
      approverId: 'alice',
      signature: sign('alice', batch),
    });
    const rejected = await site.api.batches.reject(site.root, { tenantId: 'root', batchId, reason: 'change freeze' });
    expect(rejected).toMatchObject({ state: 'rejected', rejection: { reason: 'change freeze' } });
    await drive(site);
    const failed = await site.api.metal.get(site.root, { tenantId: 'root', nodeId });
    expect(failed).toMatchObject({
      state: 'failed',
      phase: 'deploying',
      awaiting: null,
      workflow: null,
      lastError: { code: 'BATCH_REJECTED', phase: 'deploying' },
    });
    expect(failed.lastError?.message).toContain('change freeze');
    expect(await wipes(site, nodeId)).toEqual([]);

    // A rejected batch takes no more approvals.
    const late = await apiError(
      site.api.batches.approve(site.root, {
        tenantId: 'root',
        batchId,
        approverId: 'bob',
        signature: sign('bob', batch),
      }),
    );
    expect(late).toMatchObject({ code: 'INVALID_STATE', details: { reason: 'batch-rejected' } });
    expect(await apiError(site.api.batches.reject(site.root, { tenantId: 'root', batchId }))).toMatchObject({
      code: 'INVALID_STATE',
      details: { reason: 'batch-rejected' },
    });

    const recovered = await site.api.metal.recover(site.root, { tenantId: 'root', nodeId });
    expect(recovered.state).toBe('deploying');
    expect(recovered.awaiting).toMatchObject({ state: 'pending', approvals: 0, threshold: 2 });
    expect(recovered.awaiting?.batchId).not.toBe(batchId);
  });

  it('fails the machine when its batch expires unapproved', async () => {
    const nodeId = await availableMachine(site);
    const { awaiting } = await deploy(site, nodeId);
    site.clock.advance(24 * 60 * 60 * 1000);
    for (let i = 0; i < 5; i += 1) await site.compute.runDueWork();
    const failed = await site.api.metal.get(site.root, { tenantId: 'root', nodeId });
    expect(failed).toMatchObject({ state: 'failed', lastError: { code: 'BATCH_EXPIRED', phase: 'deploying' } });
    expect(
      (await site.api.batches.get(site.root, { tenantId: 'root', batchId: awaiting?.batchId as string })).state,
    ).toBe('expired');
    expect(await wipes(site, nodeId)).toEqual([]);
  });

  it('keeps batches to their tenant, and lists them newest first with a cursor', async () => {
    const other = await tokenFor(site.scratch.db, site.clock, 'acme', ['compute:metal:*']);
    const page = await site.api.batches.list(site.root, { tenantId: 'root', limit: 1 });
    expect(page.items).toHaveLength(1);
    expect(page.nextCursor).not.toBeNull();
    const next = await site.api.batches.list(site.root, {
      tenantId: 'root',
      limit: 1,
      cursor: page.nextCursor as string,
    });
    expect(next.items[0]?.id).not.toBe(page.items[0]?.id);
    const batchId = page.items[0]?.id as string;
    expect(await apiError(site.api.batches.get(other, { tenantId: 'acme', batchId }))).toMatchObject({
      code: 'NOT_FOUND',
    });
    expect((await site.api.batches.list(other, { tenantId: 'acme' })).items).toEqual([]);
    expect(
      await apiError(site.api.batches.list(site.root, { tenantId: 'root', cursor: 'bm90LWEtY3Vyc29y' })),
    ).toMatchObject({ code: 'INVALID_INPUT', details: { path: ['cursor'] } });
  });
});

describe.each([
  ['pki without approvers', 'off'],
  ['no quorum port', 'absent'],
] as const)('metal with %s', (_name, quorum) => {
  let site: Site;
  beforeAll(async () => {
    site = await makeSite({ quorum });
  });
  afterAll(() => closeSite(site));

  it('deploys straight through: no batch, nothing waits', async () => {
    const nodeId = await availableMachine(site);
    const deploying = await deploy(site, nodeId);
    expect(deploying.awaiting).toBeNull();
    expect(deploying.workflow).toMatchObject({ batchId: null, held: false });
    await drive(site);
    expect((await site.api.metal.get(site.root, { tenantId: 'root', nodeId })).state).toBe('deployed');
    expect(await wipes(site, nodeId)).toEqual([{ node_id: nodeId, batch_id: null, state: 'succeeded' }]);
    expect((await site.api.batches.list(site.root, { tenantId: 'root' })).items).toEqual([]);
    if (quorum === 'absent') {
      const error = await apiError(
        site.api.batches.approve(site.root, {
          tenantId: 'root',
          batchId: 'bat_x',
          approverId: 'alice',
          signature: 'AA',
        }),
      );
      expect(error).toMatchObject({ code: 'INVALID_CONFIG' });
    }
  });
});

// The port's contract as metal relies on it, through pki's implementation.
describe('pki().quorum()', () => {
  it('is disabled without approvers and enabled with them', () => {
    const off: QuorumPort = pki({ key: randomBytes(32).toString('hex') }).quorum();
    const on: QuorumPort = pki({ key: randomBytes(32).toString('hex'), quorum: { approvers, threshold: 2 } }).quorum();
    expect(off.enabled()).toBe(false);
    expect(on.enabled()).toBe(true);
  });
});
