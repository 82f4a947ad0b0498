import { createHash, randomBytes } from 'node:crypto';
import { betterCompute, type Compute, field, type Json, manifest, type PkiPort } from 'better-compute/core';
import {
  httpViaSite,
  metal,
  metalBmcTarget,
  metalDeployImage,
  metalProfiles,
  RELAYED_COMMAND_POLL_MS,
} from 'better-compute/metal';
import {
  addImageSigner,
  generateSigningKeyPair,
  imageSigningBytes,
  imageVerifier,
  type Pki,
  pki,
  revokeImageSigner,
  type SigningKeyPair,
  signToBase64Url,
} from 'better-compute/pki';
import {
  defineStep,
  getWorkflow,
  type ProfileStep,
  provisionModule,
  type RenderedStep,
  registerImage,
  storeProfile,
  type WorkflowView,
} from 'better-compute/provision';
import {
  createFakeAgent,
  createFakeClock,
  type FakeAgent,
  type FakeClock,
  insertNode,
  insertSite,
  settle,
} from 'better-compute/testkit';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { provisionApiOf, tokenFor } from './support/api';
import { type ScratchDatabase, scratchPglite } from './support/databases';
import { type StatementTap, tappedDatabase } from './support/statement-tap';

// Metal's steps on PGlite: the real provision engine and metal(), a site agent and the machine's agents simulated by
// FakeAgents, the machine's BMC and MACs written straight into metal's tables.

const MACS = ['aa:bb:cc:00:00:01', 'aa:bb:cc:00:00:02'];
const INVENTORY = {
  cpu: { model: 'AMD EPYC 9654', sockets: 2, cores: 192 },
  memoryMiB: 2_097_152,
  gpus: Array.from({ length: 8 }, (_, i) => ({ model: 'H100', uuid: `GPU-${i}`, migCapable: true })),
  nvswitches: 4,
  infiniband: [{ port: 'mlx5_0', rateGbps: 400 }],
  disks: [{ device: '/dev/nvme0n1', sizeBytes: 3_840_000_000_000 }],
  macs: [...MACS, 'aa:bb:cc:00:00:03'],
  addresses: ['10.0.0.7', 'fd00::7'],
};

let scratch: ScratchDatabase;
let compute: Compute;
let clock: FakeClock;
let security: Pki;
let siteId: string;
let machineId: string;
let otherMachineId: string;
let site: FakeAgent;
let machine: FakeAgent;
let profileCount = 0;

// A plugin's relaying step built on httpViaSite, as the walkthroughs write them.
const httpStep = defineStep({
  id: 'test.http',
  runsOn: 'control-plane',
  relays: ['site'],
  sends: ['site.httpProxy'],
  timeout: '5m',
  retrySafe: true,
  input: manifest({ url: field.string(), poll: field.boolean().default(false) }),
  async run(input, ctx) {
    const response = await httpViaSite(ctx, { url: input.url, poll: input.poll, pollIntervalMs: 1_000 });
    return { status: response.status, body: response.body };
  },
});
const BMC_REF = 'sec_01kbmc00000000000000000000';
// The user-data template the deploy tests render (userdata.render), and every line the compute logged.
const TEMPLATE = '#cloud-config\nhostname: {{hostname}}\n# join: {{joinToken}}\n';
const logged: string[] = [];

async function insertMachine(nodeId: string, address: string, macs: string[]): Promise<void> {
  const now = clock.now();
  await scratch.db.query(
    `INSERT INTO metal_machines (node_id, tenant_id, site_id, bmc_address, bmc_driver, bmc_credential_ref, addresses,
       created_at, updated_at)
     VALUES ($1, 'root', $2, $3, 'ipmi', '"sec_01kbmc00000000000000000000"'::jsonb, $4::text[], $5, $5)`,
    [nodeId, siteId, `10.1.0.${macs.length}${nodeId.length % 10}`, [address], now],
  );
  for (const mac of macs)
    await scratch.db.query('INSERT INTO metal_macs (mac, node_id) VALUES ($1, $2)', [mac, nodeId]);
}

/** Stores a one-off profile under root and starts it on the machine; returns the workflow id. */
async function start(steps: ProfileStep[], extra: Record<string, Json> = {}): Promise<string> {
  profileCount += 1;
  const profile = { id: `test.p${profileCount}`, version: 1, target: 'metal', steps, ...extra };
  return scratch.db.transaction(async (tx) => {
    await storeProfile(tx, { tenantId: 'root', profile }, clock.now());
    const started = await compute.context.workflows!.start(tx, {
      tenantId: 'root',
      profileId: profile.id,
      profileVersion: 1,
      nodeId: machineId,
    });
    return started.id;
  });
}

async function run(steps: ProfileStep[], extra: Record<string, Json> = {}): Promise<WorkflowView> {
  const id = await start(steps, extra);
  await settle(compute, { clock, agents: [site, machine] });
  return getWorkflow(scratch.db, { workflowId: id });
}

/** Runs what is due for up to `ms` of fake time, leaving later work queued. */
async function drive(agents: FakeAgent[], ms = 10_000): Promise<void> {
  try {
    await settle(compute, { clock, agents, horizonMs: ms });
  } catch (error) {
    if (!(error instanceof Error && /past its horizon/.test(error.message))) throw error;
  }
}

interface CommandRow {
  node_id: string;
  kind: string;
  key: string;
  payload: Record<string, Json>;
  target_node_id: string | null;
  state: string;
}

async function commandsOf(workflowId: string): Promise<CommandRow[]> {
  const { rows } = await scratch.db.query<CommandRow>(
    `SELECT node_id, kind, key, payload, target_node_id, state FROM commands WHERE key LIKE $1 ORDER BY created_at, id`,
    [`wf:${workflowId}:%`],
  );
  return rows;
}

/** Starts `metal.ensureRamdisk` and drives it until its boot entries are out: the workflow and its token inserts. */
async function sendBootEntries(): Promise<{ id: string; tokenWrites: string[] }> {
  tap.recorded = [];
  const id = await start([{ use: 'metal.ensureRamdisk', on: 'site' }]);
  for (let i = 0; i < 4; i += 1) await drive([site]);
  const statements = tap.recorded ?? [];
  tap.recorded = undefined;
  return { id, tokenWrites: statements.filter((text) => /INSERT INTO pki_join_tokens/.test(text)) };
}

/**
 * The boot entries a workflow sent carry one reference each (two MACs), and the references resolve to the machine's
 * single-use node tokens, all of them.
 */
async function expectEntriesCarryTheMachineTokens(workflowId: string): Promise<void> {
  const refs = (await commandsOf(workflowId))
    .filter((c) => c.kind === 'site.bootEntry')
    .map((c) => c.payload.tokenRef as string);
  expect(refs).toHaveLength(2);
  const tokens = await Promise.all(refs.map((ref) => security.secrets(scratch.db).resolve(ref)));
  const { rows } = await scratch.db.query<{ id: string }>(
    "SELECT id FROM pki_join_tokens WHERE node_id = $1 AND role = 'node' AND max_uses = 1 ORDER BY id",
    [machineId],
  );
  expect(tokens.map((token) => token.split('.')[0]).sort()).toEqual(rows.map((row) => row.id));
}

// The engine's statements, as a test records them or hooks a write of someone else's between two of them.
const tap: StatementTap = { recorded: undefined, after: undefined };

// The PKI port the compute has: `stages` (the full port: a boot entry's token written by the entry's send), `seals`
// (no staging: the token and its secret minted by one statement of their own) or `mints` (neither: mint, then
// ctx.secrets), as PKI ports without those methods.
let tokenPort: 'stages' | 'seals' | 'mints' = 'stages';
let pkiPort: PkiPort;

beforeAll(async () => {
  scratch = await scratchPglite();
  clock = createFakeClock();
  security = pki({ key: randomBytes(32), clock });
  const port = security.port();
  pkiPort = {
    issueJoinToken: (tx, input) => port.issueJoinToken(tx, input),
    get issueJoinTokenSecret() {
      return tokenPort === 'mints' ? undefined : port.issueJoinTokenSecret;
    },
    get stageJoinTokenSecret() {
      return tokenPort === 'stages' ? port.stageJoinTokenSecret : undefined;
    },
  };
  const bareMetal = metal();
  // metal() registers metalExtensions (its steps and metalBmcTarget) once its module lists them; until then the driver
  // target rides on a module of its own here.
  const alreadyThere = (bareMetal.extensions as readonly { id: string }[]).some((e) => e.id === 'metal.bmc');
  const bmc = { id: 'metal-bmc', extensions: alreadyThere ? [] : [metalBmcTarget] };
  compute = await betterCompute({
    database: tappedDatabase(scratch.db, tap),
    clock,
    modules: [
      security.module,
      provisionModule({
        steps: [httpStep],
        modules: [bareMetal, bmc],
        userData: { templates: { 'test.cloud': TEMPLATE } },
      }),
      bareMetal,
      bmc,
    ],
    logger: {
      debug: (message, fields) => logged.push(JSON.stringify({ message, fields })),
      info: (message, fields) => logged.push(JSON.stringify({ message, fields })),
      warn: (message, fields) => logged.push(JSON.stringify({ message, fields })),
      error: (message, fields) => logged.push(JSON.stringify({ message, fields })),
    },
    pki: pkiPort,
    secrets: security.secrets(scratch.db),
    attestation: security.attestation(),
  });
});
afterAll(async () => {
  await compute.close();
  await scratch.drop();
});

beforeEach(async () => {
  tap.after = undefined;
  tap.recorded = undefined;
  await scratch.db.query(
    `TRUNCATE metal_machines, metal_macs, workflow_steps, workflows, profiles, commands, work_items, events,
       agent_sessions, pki_secrets, nodes, sites CASCADE`,
  );
  siteId = await insertSite(scratch.db, {}, clock);
  machineId = await insertNode(scratch.db, { siteId, labels: { rack: 'r12', 'gpu.model': 'A100' } }, clock);
  otherMachineId = await insertNode(scratch.db, { siteId }, clock);
  await insertMachine(machineId, '10.0.0.7', MACS);
  await insertMachine(otherMachineId, '10.0.0.8', ['aa:bb:cc:00:00:09']);
  const siteAgentId = await insertNode(scratch.db, { siteId, kind: 'site-agent' }, clock);
  site = createFakeAgent(compute, { nodeId: siteAgentId, role: 'site' });
  machine = createFakeAgent(compute, { nodeId: machineId, role: 'ramdisk' });
  await site.connect();
});

describe('relaying BMC steps', () => {
  it.each([
    ['power.setPower', { action: 'cycle' }, 'power.setPower', { action: 'cycle' }, 'power'],
    [
      'management.setBootDevice',
      { device: 'cd' },
      'management.setBootDevice',
      { device: 'cd', persistent: false },
      'boot-device',
    ],
    [
      'media.insert',
      { url: 'https://cache.site-a/x.iso' },
      'virtual-media.insert',
      { url: 'https://cache.site-a/x.iso', device: 'cd' },
      'media',
    ],
    ['media.eject', {}, 'virtual-media.eject', { device: 'cd' }, 'media'],
  ] as const)(
    '%s sends one driver.invoke with the machine bmc to the site agent',
    async (use, input, operation, sent, key) => {
      const wf = await run([{ use, on: 'site', with: input }]);
      expect(wf.state).toBe('succeeded');
      const commands = await commandsOf(wf.id);
      expect(commands).toEqual([
        {
          node_id: site.nodeId,
          kind: 'driver.invoke',
          key: `wf:${wf.id}:main.1#0:${key}`,
          target_node_id: machineId,
          state: 'succeeded',
          payload: {
            operation,
            driver: { name: 'ipmi' },
            input: sent,
            bmc: { address: expect.any(String), driver: 'ipmi', credentialRef: BMC_REF },
          },
        },
      ]);
    },
  );

  it('looks at an open BMC command again only after 5 minutes, and goes on at once when it settles', async () => {
    const dueAt = async () => {
      const { rows } = await scratch.db.query<{ not_before: Date }>(
        "SELECT not_before FROM work_items WHERE kind = 'workflow'",
      );
      return rows[0]?.not_before.getTime();
    };
    site.respond({ outcome: 'ignore' });
    const id = await start([{ use: 'power.setPower', on: 'site', with: { action: 'off' } }]);
    await compute.runDueWork();
    expect(await dueAt()).toBe(clock.now().getTime() + RELAYED_COMMAND_POLL_MS);
    expect(RELAYED_COMMAND_POLL_MS).toBe(300_000);
    site.respond({ outcome: 'succeed' });
    await site.poll();
    expect(await dueAt()).toBe(clock.now().getTime());
    await settle(compute, { clock, agents: [site] });
    expect((await getWorkflow(scratch.db, { workflowId: id })).state).toBe('succeeded');
  });

  it("binds the profile's driver for the concern over the machine's own", async () => {
    const wf = await run([{ use: 'power.setPower', on: 'site', with: { action: 'off' } }], {
      drivers: { power: { name: 'redfish', insecure: false } },
    });
    const [command] = await commandsOf(wf.id);
    expect(command?.payload.driver).toEqual({ name: 'redfish', insecure: false });
  });

  it("a profile's driver operation (no registered step) carries the machine's bmc through metal's driver target", async () => {
    const wf = await run([{ use: 'bios.apply', on: 'site', with: { settings: { SriovGlobalEnable: 'Enabled' } } }], {
      drivers: { bios: { name: 'redfish' } },
    });
    expect(wf.state).toBe('succeeded');
    expect(await commandsOf(wf.id)).toEqual([
      {
        node_id: site.nodeId,
        kind: 'driver.invoke',
        key: `wf:${wf.id}:main.1`,
        target_node_id: machineId,
        state: 'succeeded',
        payload: {
          operation: 'bios.apply',
          driver: { name: 'redfish' },
          input: { settings: { SriovGlobalEnable: 'Enabled' } },
          bmc: { address: expect.any(String), driver: 'ipmi', credentialRef: BMC_REF },
        },
      },
    ]);
  });

  it("media.insert reads fromStep's url from workflow_steps", async () => {
    site.respond('driver.invoke', (command) =>
      (command.payload as { operation: string }).operation === 'power.getPower'
        ? { outcome: 'succeed', result: { state: 'on' } }
        : { outcome: 'succeed' },
    );
    // media.insert's own result carries the url, so one media.insert can feed the next.
    const wf = await run([
      { use: 'media.insert', on: 'site', with: { url: 'https://cache.site-a/a.iso' } },
      { use: 'media.insert', on: 'site', with: { fromStep: 'media.insert', device: 'usb' } },
    ]);
    expect(wf.state).toBe('succeeded');
    const commands = await commandsOf(wf.id);
    expect(commands.map((c) => (c.payload.input as { url: string; device: string }).device)).toEqual(['cd', 'usb']);
    expect(commands[1]?.payload.input).toMatchObject({ url: 'https://cache.site-a/a.iso' });
  });

  it('media.insert fails when no earlier step made a url', async () => {
    const wf = await run([{ use: 'media.insert', on: 'site', with: { fromStep: 'autoinstall.renderIso' } }]);
    expect(wf.state).toBe('failed');
    expect(wf.steps[0]?.error?.code).toBe('INVALID_STATE');
    expect(await commandsOf(wf.id)).toEqual([]);
  });

  it('power.getPower reads the state the BMC reports', async () => {
    site.respond('driver.invoke', { outcome: 'succeed', result: { state: 'off' } });
    const wf = await run([{ use: 'power.getPower', on: 'site' }]);
    expect(wf.steps[0]?.result).toMatchObject({ state: 'off' });
  });

  it('a failed BMC command fails the step DRIVER_ERROR', async () => {
    site.respond('driver.invoke', { outcome: 'fail', reason: 'BMC unreachable' });
    const wf = await run([{ use: 'power.setPower', on: 'site', with: { action: 'on' } }]);
    expect(wf.state).toBe('failed');
    expect(wf.steps[0]?.error).toMatchObject({ code: 'DRIVER_ERROR' });
  });

  it('with no site agent connected it waits, then fails NO_SITE_AGENT', async () => {
    await site.disconnect();
    const wf = await run([{ use: 'power.setPower', on: 'site', with: { action: 'on' }, timeout: '1m' }]);
    expect(wf.state).toBe('failed');
    expect(wf.steps[0]?.error?.code).toBe('NO_SITE_AGENT');
  });
});

describe('metal.ensureRamdisk', () => {
  it('sends the boot device, a boot entry per MAC with a token reference, and a power cycle, then waits for the ramdisk', async () => {
    site.respond('driver.invoke', (command) => {
      const operation = (command.payload as { operation: string }).operation;
      if (operation === 'power.setPower') void machine.connect();
      return { outcome: 'succeed' };
    });
    const wf = await run([{ use: 'metal.ensureRamdisk', on: 'site' }]);
    expect(wf.state).toBe('succeeded');
    const commands = await commandsOf(wf.id);
    expect(commands.map((c) => `${c.kind} ${c.key.split('#0:')[1]}`)).toEqual([
      'driver.invoke boot-device',
      `site.bootEntry boot-entry:${MACS[0]}`,
      `site.bootEntry boot-entry:${MACS[1]}`,
      'driver.invoke power-cycle',
    ]);
    expect(commands[0]?.payload.input).toEqual({ device: 'pxe', persistent: false });
    expect(commands[3]?.payload.input).toEqual({ action: 'cycle' });
    const refs = commands.filter((c) => c.kind === 'site.bootEntry').map((c) => c.payload.tokenRef as string);
    expect(refs.every((ref) => /^sec_/.test(ref))).toBe(true);
    expect(new Set(refs).size).toBe(2);
    // Only references travel: no command payload holds a token.
    expect(JSON.stringify(commands)).not.toMatch(/tok_[0-9a-z]+\./);
    const { rows } = await scratch.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pki_join_tokens WHERE node_id = $1 AND role = 'node' AND max_uses = 1",
      [machineId],
    );
    expect(rows[0]?.n).toBe(2);
    expect(wf.steps[0]?.result).toMatchObject({ bootId: machine.bootId, macs: 2 });
  });

  it("writes the boot entries' tokens and secrets by the statement that starts the step and sends the sequence, not ones of their own", async () => {
    const { id, tokenWrites } = await sendBootEntries();
    expect(tokenWrites).toHaveLength(1);
    const [text = ''] = tokenWrites;
    // The step's start (its run reads nothing of its own: the claim read the machine).
    expect(text).toMatch(/^WITH wf AS \(UPDATE workflows/);
    expect(text).toMatch(/st AS \(UPDATE workflow_steps/);
    expect(text.match(/INSERT INTO pki_join_tokens/g)).toHaveLength(2);
    expect(text.match(/INSERT INTO pki_secrets/g)).toHaveLength(2);
    expect(text).toMatch(/INSERT INTO commands/);
    // Each entry's reference resolves to a token of the machine, and those are all the tokens there are.
    await expectEntriesCarryTheMachineTokens(id);
  });

  it("takes the machine and its commands from the claim's preload: no pass reads them itself", async () => {
    site.respond('driver.invoke', (command) => {
      const operation = (command.payload as { operation: string }).operation;
      if (operation === 'power.setPower') void machine.connect();
      return { outcome: 'succeed' };
    });
    machine.respond('inspect.collect', { outcome: 'succeed', result: INVENTORY });
    tap.recorded = [];
    const wf = await run([
      { use: 'metal.ensureRamdisk', on: 'site' },
      { use: 'inspect.collect', on: 'ramdisk' },
    ]);
    const statements = tap.recorded ?? [];
    tap.recorded = undefined;
    expect(wf.state).toBe('succeeded');
    expect((await commandsOf(wf.id)).map((c) => c.key.split('#0:')[1])).toEqual([
      'boot-device',
      `boot-entry:${MACS[0]}`,
      `boot-entry:${MACS[1]}`,
      'power-cycle',
      'inventory',
    ]);
    // Five commands answered, each result a pass of its own, and the ramdisk's join one more: the claims read the
    // machine (with metal's preload) and the step's commands, so neither the machine's read, the node's read, nor a
    // command lookup by key ran.
    expect(statements.filter((text) => /'metal\.machine'/.test(text)).length).toBeGreaterThanOrEqual(6);
    expect(statements.filter((text) => / AS machine, \(SELECT coalesce/.test(text))).toEqual([]);
    expect(statements.filter((text) => /FROM nodes n LEFT JOIN commands c/.test(text))).toEqual([]);
    expect(statements.filter((text) => /FROM commands WHERE node_id = \$1 AND key = \$2/.test(text))).toEqual([]);
    expect(wf.steps[1]?.result).toMatchObject({ labels: { 'gpu.model': 'H100' } });
  });

  it('sends its commands as one sequence: the site agent gets each after the one before it, a re-run sends nothing again', async () => {
    // The step runs again and again while its commands are open: each run finds what the first one sent (by key).
    site.respond('driver.invoke', { outcome: 'ignore' });
    site.respond('site.bootEntry', { outcome: 'ignore' });
    const id = await start([{ use: 'metal.ensureRamdisk', on: 'site' }]);
    for (let i = 0; i < 5; i += 1) await drive([site]);
    const sent = await scratch.db.query<{ key: string; after_key: string | null; state: string }>(
      'SELECT key, after_key, state FROM commands WHERE workflow_id = $1 ORDER BY created_at, id',
      [id],
    );
    const short = (key: string | null) => key?.split('#0:')[1] ?? null;
    expect(sent.rows.map((c) => [short(c.key), short(c.after_key), c.state])).toEqual([
      ['boot-device', null, 'dispatched'],
      [`boot-entry:${MACS[0]}`, 'boot-device', 'pending'],
      [`boot-entry:${MACS[1]}`, `boot-entry:${MACS[0]}`, 'pending'],
      ['power-cycle', `boot-entry:${MACS[1]}`, 'pending'],
    ]);
    site.respond('driver.invoke', { outcome: 'succeed' });
    site.respond('site.bootEntry', { outcome: 'succeed' });
    for (let i = 0; i < 4; i += 1) await site.poll();
    expect(site.answered.filter((a) => a.outcome === 'succeed').map((a) => short(a.key))).toEqual([
      'boot-device',
      `boot-entry:${MACS[0]}`,
      `boot-entry:${MACS[1]}`,
      'power-cycle',
    ]);
    await machine.connect();
    await settle(compute, { clock, agents: [site, machine] });
    expect((await commandsOf(id)).map((c) => c.key.split('#0:')[1])).toEqual(sent.rows.map((c) => short(c.key)));
    expect((await getWorkflow(scratch.db, { workflowId: id })).state).toBe('succeeded');
    const { rows } = await scratch.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pki_join_tokens WHERE node_id = $1',
      [machineId],
    );
    expect(rows[0]?.n).toBe(2);
  });

  it('goes on once the ramdisk joined while the BMC has not answered the power cycle yet, and not before', async () => {
    site.respond('driver.invoke', (command) =>
      (command.payload as { operation: string }).operation === 'power.setPower'
        ? { outcome: 'silent' }
        : { outcome: 'succeed' },
    );
    const id = await start([{ use: 'metal.ensureRamdisk', on: 'site' }]);
    for (let i = 0; i < 6; i += 1) await drive([site]);
    const cycle = async () => (await commandsOf(id)).find((c) => c.key.endsWith(':power-cycle'))?.state;
    expect(await cycle()).toBe('running');
    expect((await getWorkflow(scratch.db, { workflowId: id })).steps[0]?.state).toBe('running');
    await machine.connect();
    await settle(compute, { clock, agents: [site, machine] });
    const wf = await getWorkflow(scratch.db, { workflowId: id });
    expect(wf.steps[0]).toMatchObject({ state: 'succeeded', result: { bootId: machine.bootId } });
    expect(await cycle()).toBe('running');
  });

  it('fails DRIVER_ERROR when the boot device cannot be set, and the rest of the sequence never reaches the site agent', async () => {
    site.respond('driver.invoke', { outcome: 'fail', reason: 'BMC unreachable' });
    const wf = await run([{ use: 'metal.ensureRamdisk', on: 'site' }]);
    expect(wf.steps[0]).toMatchObject({ state: 'failed', error: { code: 'DRIVER_ERROR', reason: 'BMC unreachable' } });
    const commands = await commandsOf(wf.id);
    expect(commands.map((c) => c.state)).toEqual(['failed', 'cancelled', 'cancelled', 'cancelled']);
    expect(site.answered.map((a) => a.key.split('#0:')[1])).toEqual(['boot-device']);
  });
});

describe('inspect.collect', () => {
  it("records the inventory as facts, labels (keeping the operator's) and known addresses", async () => {
    await machine.connect();
    machine.respond('inspect.collect', { outcome: 'succeed', result: INVENTORY });
    const wf = await run([{ use: 'inspect.collect', on: 'ramdisk' }]);
    expect(wf.state).toBe('succeeded');
    const [command] = await commandsOf(wf.id);
    expect(command).toMatchObject({
      node_id: machineId,
      kind: 'inspect.collect',
      key: `wf:${wf.id}:main.1#0:inventory`,
    });
    const { rows } = await scratch.db.query<{ labels: Record<string, string>; facts: Record<string, Json> }>(
      'SELECT labels, facts FROM nodes WHERE id = $1',
      [machineId],
    );
    expect(rows[0]?.labels).toEqual({
      rack: 'r12',
      'gpu.model': 'H100',
      'gpu.count': '8',
      'mig.capable': 'true',
      nvswitch: 'true',
      'ib.ports': '1',
      'cpu.model': 'AMD EPYC 9654',
      'cpu.cores': '192',
      'memory.gib': '2048',
      'disk.count': '1',
    });
    expect(rows[0]?.facts.inventory).toMatchObject({ gpus: expect.any(Array), nvswitches: 4 });
    expect(JSON.stringify(rows[0]?.facts)).toContain('GPU-7');
    const machineRow = await scratch.db.query<{ addresses: string[] }>(
      'SELECT addresses FROM metal_machines WHERE node_id = $1',
      [machineId],
    );
    expect(machineRow.rows[0]?.addresses).toEqual(['10.0.0.7', 'fd00::7']);
    const macs = await scratch.db.query<{ mac: string }>('SELECT mac FROM metal_macs WHERE node_id = $1 ORDER BY mac', [
      machineId,
    ]);
    expect(macs.rows.map((r) => r.mac)).toEqual([...MACS, 'aa:bb:cc:00:00:03']);
  });

  it("keeps an operator's label written between the step's read of the node and its write", async () => {
    await machine.connect();
    machine.respond('inspect.collect', { outcome: 'succeed', result: INVENTORY });
    let raced = 0;
    // The read the write starts from: the one that finds the ramdisk's report in, the step's own or the claim's.
    const preloadedReport = (row: Record<string, unknown> | undefined) => {
      const reads = (row?.preloaded as { step_reads?: { commands?: { state?: string }[] } } | null)?.step_reads;
      return reads?.commands?.some((c) => c.state === 'succeeded') === true;
    };
    tap.after = {
      pattern: /xmin::text AS version|'version', n\.xmin::text/,
      when: (rows) => rows[0]?.state === 'succeeded' || rows.some((row) => preloadedReport(row)),
      run: async () => {
        raced += 1;
        await scratch.db.query(`UPDATE nodes SET labels = labels || '{"owner":"team-a"}'::jsonb WHERE id = $1`, [
          machineId,
        ]);
      },
    };
    const wf = await run([{ use: 'inspect.collect', on: 'ramdisk' }]);
    expect(raced).toBe(1);
    expect(wf.state).toBe('succeeded');
    const { rows } = await scratch.db.query<{ labels: Record<string, string> }>(
      'SELECT labels FROM nodes WHERE id = $1',
      [machineId],
    );
    expect(rows[0]?.labels).toMatchObject({ rack: 'r12', owner: 'team-a', 'gpu.model': 'H100', 'gpu.count': '8' });
  });

  it('writes the inventory by the statement that records the step succeeded, not one of its own', async () => {
    await machine.connect();
    machine.respond('inspect.collect', { outcome: 'succeed', result: INVENTORY });
    site.respond('driver.invoke', { outcome: 'succeed' });
    tap.recorded = [];
    const wf = await run([
      { use: 'inspect.collect', on: 'ramdisk' },
      { use: 'power.setPower', on: 'site', with: { action: 'off' } },
    ]);
    const statements = tap.recorded ?? [];
    tap.recorded = undefined;
    expect(wf.steps.map((s) => s.state)).toEqual(['succeeded', 'succeeded']);
    const writes = statements.filter((text) => /UPDATE nodes SET labels/.test(text));
    expect(writes).toHaveLength(1);
    expect(writes[0]).toMatch(/UPDATE workflows SET revision/);
    expect(writes[0]).toMatch(/UPDATE workflow_steps s SET/);
    const { rows } = await scratch.db.query<{ labels: Record<string, string> }>(
      'SELECT labels FROM nodes WHERE id = $1',
      [machineId],
    );
    expect(rows[0]?.labels).toMatchObject({ rack: 'r12', 'gpu.model': 'H100', nvswitch: 'true' });
  });

  it('decides the steps after it on the labels its inventory wrote, not the ones read before', async () => {
    await machine.connect();
    machine.respond('inspect.collect', { outcome: 'succeed', result: INVENTORY });
    site.respond('driver.invoke', { outcome: 'succeed' });
    // Before the inspection the machine has no nvswitch label; its inventory has four.
    const wf = await run([
      { use: 'inspect.collect', on: 'ramdisk' },
      { use: 'power.setPower', on: 'site', with: { action: 'off' }, when: 'nvswitch' },
      { use: 'power.setPower', on: 'site', with: { action: 'on' }, when: '!nvswitch' },
      { use: 'power.setPower', on: 'site', with: { action: 'cycle' }, when: 'gpu.model=H100' },
    ]);
    expect(wf.state).toBe('succeeded');
    expect(wf.steps.map((s) => s.state)).toEqual(['succeeded', 'succeeded', 'skipped', 'succeeded']);
  });

  it('a bad report fails INVALID_INPUT and writes nothing', async () => {
    await machine.connect();
    machine.respond('inspect.collect', {
      outcome: 'succeed',
      result: { ...INVENTORY, gpus: [{ model: 'H\u0007100', uuid: 'x' }] },
    });
    const wf = await run([{ use: 'inspect.collect', on: 'ramdisk' }]);
    expect(wf.steps[0]?.error?.code).toBe('INVALID_INPUT');
    const { rows } = await scratch.db.query<{ labels: Record<string, string> }>(
      'SELECT labels FROM nodes WHERE id = $1',
      [machineId],
    );
    expect(rows[0]?.labels).toEqual({ rack: 'r12', 'gpu.model': 'A100' });
  });
});

describe('disk.wipe', () => {
  let key: SigningKeyPair;
  let serial: string;

  async function enroll(nodeId: string): Promise<{ key: SigningKeyPair; serial: string }> {
    const signing = generateSigningKeyPair('ed25519');
    const joined = await scratch.db.transaction(async (tx) => {
      const { token } = await security.issueJoinToken(tx, { tenantId: 'root', role: 'node', nodeId, ttlSeconds: 60 });
      return security.joinAgent(tx, { token, publicKey: signing.publicKeyPem });
    });
    return { key: signing, serial: joined.serial };
  }

  beforeEach(async () => {
    ({ key, serial } = await enroll(machineId));
    await machine.connect();
  });

  const signed = (signer: SigningKeyPair, certificateSerial: string, body: (commandId: string) => Json) =>
    machine.respond('disk.wipe', (command) => {
      const bytes = new TextEncoder().encode(JSON.stringify(body(command.id)));
      return {
        outcome: 'succeed',
        result: bytes,
        attested: { alg: signer.alg, signature: signToBase64Url(signer.privateKeyPem, bytes), certificateSerial },
      };
    });

  it("succeeds with the machine's own signature over a result naming the command", async () => {
    signed(key, serial, (commandId) => ({ commandId, wiped: true, disks: ['/dev/nvme0n1'] }));
    const wf = await run([{ use: 'disk.wipe', on: 'ramdisk' }]);
    expect(wf.state).toBe('succeeded');
    expect(wf.steps[0]?.result).toMatchObject({ certificateSerial: serial });
  });

  it.each([
    [
      'unsigned',
      () => machine.respond('disk.wipe', (c) => ({ outcome: 'succeed', result: { commandId: c.id, wiped: true } })),
    ],
    [
      'forged (another key)',
      () => signed(generateSigningKeyPair('ed25519'), serial, (commandId) => ({ commandId, wiped: true })),
    ],
    [
      'tampered',
      () =>
        machine.respond('disk.wipe', (command) => {
          const bytes = new TextEncoder().encode(JSON.stringify({ commandId: command.id, wiped: true }));
          const tampered = new TextEncoder().encode(JSON.stringify({ commandId: command.id, wiped: true, x: 1 }));
          return {
            outcome: 'succeed',
            result: tampered,
            attested: { alg: key.alg, signature: signToBase64Url(key.privateKeyPem, bytes), certificateSerial: serial },
          };
        }),
    ],
    ['replayed (another command)', () => signed(key, serial, () => ({ commandId: 'cmd_old', wiped: true }))],
    ['not wiped', () => signed(key, serial, (commandId) => ({ commandId, wiped: false }))],
  ])('fails DRIVER_ERROR when the result is %s', async (_name, answer) => {
    answer();
    const wf = await run([{ use: 'disk.wipe', on: 'ramdisk' }]);
    expect(wf.state).toBe('failed');
    expect(wf.steps[0]?.error?.code).toBe('DRIVER_ERROR');
  });

  it("fails DRIVER_ERROR when another node's certificate signed", async () => {
    const other = await enroll(otherMachineId);
    signed(other.key, other.serial, (commandId) => ({ commandId, wiped: true }));
    const wf = await run([{ use: 'disk.wipe', on: 'ramdisk' }]);
    expect(wf.steps[0]?.error).toMatchObject({ code: 'DRIVER_ERROR', reason: 'certificate-other-node' });
  });
});

describe('deploy.deploy and the agent steps', () => {
  it.each([
    ['diag.dcgm', 'ramdisk', { level: 3 }, { level: 3 }],
    [
      'daemon.upgrade',
      'node',
      { url: 'https://dl/bcd', sha256: 'a'.repeat(64) },
      { url: 'https://dl/bcd', sha256: 'a'.repeat(64) },
    ],
  ] as const)('%s sends its command to the machine with the step input', async (use, on, input, payload) => {
    await machine.connect();
    machine.respond(use, (command) => {
      if (use === 'daemon.upgrade') void machine.rejoin({ role: 'node' });
      return command.kind === use ? { outcome: 'succeed' } : { outcome: 'reject', reason: 'unexpected' };
    });
    const wf = await run([{ use, on, ...(use === 'daemon.upgrade' ? {} : {}), with: input }]);
    expect(wf.state).toBe('succeeded');
    expect(await commandsOf(wf.id)).toEqual([
      expect.objectContaining({ node_id: machineId, kind: use, key: `wf:${wf.id}:main.1`, payload }),
    ]);
  });

  it('health.resetGpus refuses a GPU the machine does not have, sending nothing', async () => {
    const wf = await run([{ use: 'health.resetGpus', on: 'node', with: { gpus: ['GPU-unknown'] } }]);
    expect(wf.steps[0]?.error?.code).toBe('INVALID_INPUT');
    expect(await commandsOf(wf.id)).toEqual([]);
  });
});

describe('httpViaSite', () => {
  it.each([
    ['loopback', 'http://127.0.0.1:50000/machine/version'],
    ['IPv4-mapped loopback', 'http://[::ffff:127.0.0.1]/'],
    ['link-local metadata', 'http://169.254.169.254/latest/meta-data'],
    ['IPv6 metadata', 'http://[fd00:ec2::254]/'],
    ["another machine's address", 'http://10.0.0.8:50000/machine/version'],
    ['a host name', 'http://machine.local/'],
    ['credentials', 'http://user:pw@10.0.0.7/'],
  ])('refuses %s with INVALID_INPUT and sends nothing', async (_name, url) => {
    const wf = await run([{ use: 'test.http', on: 'site', with: { url } }]);
    expect(wf.steps[0]?.error).toMatchObject({ code: 'INVALID_INPUT', reason: 'ssrf' });
    expect(await commandsOf(wf.id)).toEqual([]);
  });

  it("sends one site.httpProxy to the site agent for the machine's own address", async () => {
    site.respond('site.httpProxy', { outcome: 'succeed', result: { status: 200, headers: {}, body: 'v1.9.2' } });
    const wf = await run([{ use: 'test.http', on: 'site', with: { url: 'https://10.0.0.7:50000/machine/version' } }]);
    expect(wf.steps[0]?.result).toEqual({ status: 200, body: 'v1.9.2' });
    expect(await commandsOf(wf.id)).toEqual([
      {
        node_id: site.nodeId,
        kind: 'site.httpProxy',
        key: `wf:${wf.id}:main.1#0:http#0`,
        target_node_id: machineId,
        state: 'succeeded',
        payload: { method: 'GET', url: 'https://10.0.0.7:50000/machine/version', timeoutMs: 30_000 },
      },
    ]);
  });

  it('without poll, no answer is DRIVER_ERROR', async () => {
    site.respond('site.httpProxy', { outcome: 'fail', reason: 'connection refused' });
    const wf = await run([{ use: 'test.http', on: 'site', with: { url: 'http://10.0.0.7/' } }]);
    expect(wf.steps[0]?.error?.code).toBe('DRIVER_ERROR');
    expect(await commandsOf(wf.id)).toHaveLength(1);
  });

  it('with poll, asks again until the machine answers (a 5xx is not an answer yet)', async () => {
    let calls = 0;
    site.respond('site.httpProxy', () => {
      calls += 1;
      if (calls === 1) return { outcome: 'fail', reason: 'connection refused' };
      if (calls === 2) return { outcome: 'succeed', result: { status: 503, body: 'starting' } };
      return { outcome: 'succeed', result: { status: 200, body: 'ready' } };
    });
    const wf = await run([{ use: 'test.http', on: 'site', with: { url: 'http://10.0.0.7/', poll: true } }]);
    expect(wf.state).toBe('succeeded');
    expect(wf.steps[0]?.result).toEqual({ status: 200, body: 'ready' });
    const keys = (await commandsOf(wf.id)).map((c) => c.key.split('#0:')[1]);
    expect(keys).toEqual(['http#0', 'http#1', 'http#2']);
  });
});

describe('shipped profiles', () => {
  it.each(metalProfiles.map((p) => [p.id] as const))('%s resolves on a metal node (every use and with)', async (id) => {
    const rolledBack = new Error('rolled back');
    const steps = await scratch.db
      .transaction(async (tx) => {
        const started = await compute.context.workflows!.start(tx, {
          tenantId: 'root',
          profileId: id,
          nodeId: machineId,
        });
        const { rows } = await tx.query<{ action: string }>(
          'SELECT action FROM workflow_steps WHERE workflow_id = $1 ORDER BY position',
          [started.id],
        );
        throw Object.assign(rolledBack, { rows });
      })
      .catch((error: unknown) => {
        if (error !== rolledBack) throw error;
        return (error as unknown as { rows: { action: string }[] }).rows.map((r) => r.action);
      });
    expect(steps.length).toBeGreaterThan(0);
  });
});

describe('metal.ensureRamdisk and its token secrets', () => {
  const secretsLeft = async (refs: string[]) =>
    (
      await scratch.db.query<{ n: number }>('SELECT count(*)::int AS n FROM pki_secrets WHERE id = ANY($1::text[])', [
        refs,
      ])
    ).rows[0]?.n;

  it("deletes the boot entries' token secrets once the ramdisk joined, and not before", async () => {
    const id = await start([{ use: 'metal.ensureRamdisk', on: 'site' }]);
    for (let i = 0; i < 4; i += 1) await drive([site]);
    const commands = await commandsOf(id);
    expect(commands.map((c) => c.key.split('#0:')[1])).toContain('power-cycle');
    const refs = commands.filter((c) => c.kind === 'site.bootEntry').map((c) => c.payload.tokenRef as string);
    expect(refs).toHaveLength(2);
    // Waiting for the ramdisk: the site agent may still need the tokens.
    expect(await secretsLeft(refs)).toBe(2);
    // One of them is gone already (as after a run that deleted it and crashed before settling): deleting it again is
    // harmless.
    await security.secrets(scratch.db).delete?.(refs[0] as string);
    await machine.connect();
    tap.recorded = [];
    await settle(compute, { clock, agents: [site, machine] });
    const statements = tap.recorded ?? [];
    tap.recorded = undefined;
    expect((await getWorkflow(scratch.db, { workflowId: id })).state).toBe('succeeded');
    expect(await secretsLeft(refs)).toBe(0);
    // Deleted by the statement that settles the step, not by statements of their own.
    expect(statements.filter((text) => /DELETE FROM pki_secrets/.test(text))).toEqual([
      expect.stringMatching(/secrets_deleted AS \(/),
    ]);
    // The tokens themselves were never stored in clear, and their references are all a payload carries.
    expect(JSON.stringify(await commandsOf(id))).not.toMatch(/tok_[0-9a-z]+\./);
  });
});

describe('metal.ensureRamdisk with a PKI port that cannot stage a token, or store it as a secret', () => {
  afterEach(() => {
    tokenPort = 'stages';
  });

  it('mints each token and its secret by one statement of their own when the port cannot stage them', async () => {
    tokenPort = 'seals';
    const { id, tokenWrites } = await sendBootEntries();
    expect(tokenWrites).toHaveLength(2);
    for (const text of tokenWrites) expect(text).not.toMatch(/step_send AS \(/);
    await expectEntriesCarryTheMachineTokens(id);
  });

  it("mints each token, then stores it with ctx.secrets: the reference resolves to the machine's token", async () => {
    tokenPort = 'mints';
    const id = await start([{ use: 'metal.ensureRamdisk', on: 'site' }]);
    for (let i = 0; i < 4; i += 1) await drive([site]);
    await expectEntriesCarryTheMachineTokens(id);
  });
});

describe('deploy.deploy', () => {
  const releaseKey = generateSigningKeyPair('ed25519');
  const signers: Record<string, string> = {};
  let version = 0;

  /** Registers `test/os@<version>` (default a fresh one) in `tenantId`, signed by that tenant's allowlisted signer. */
  async function catalogImage(tenantId = 'root', at = `${++version}.0`) {
    const digest = `sha256:${createHash('sha256').update(`${tenantId}:${at}`).digest('hex')}`;
    const url = `https://images.${tenantId}.example/test/os-${at}.img`;
    await scratch.db.transaction((tx) =>
      registerImage(
        tx,
        {
          tenantId,
          name: 'test/os',
          version: at,
          digest,
          signature: signToBase64Url(releaseKey.privateKeyPem, imageSigningBytes(digest)),
          url,
        },
        imageVerifier,
        { clock },
      ),
    );
    return { ref: `test/os@${at}`, digest, url };
  }

  beforeAll(async () => {
    await scratch.db.query(
      "INSERT INTO tenants (id, name, created_at) VALUES ('acme', 'Acme', $1) ON CONFLICT (id) DO NOTHING",
      [clock.now()],
    );
    for (const tenantId of ['root', 'acme']) {
      signers[tenantId] = (
        await scratch.db.transaction((tx) =>
          addImageSigner(tx, { tenantId, name: 'release', publicKey: releaseKey.publicKeyPem }, { clock }),
        )
      ).id;
    }
  });

  beforeEach(async () => {
    logged.length = 0;
    await machine.connect();
  });

  it("resolves a catalog image in the machine owner's tenant, verified, and sends it with the rendered user data by reference", async () => {
    // Root and acme each have their own test/os@<v>; metal's record says acme owns the machine.
    const at = `${++version}.0`;
    await catalogImage('root', at);
    const image = await catalogImage('acme', at);
    await scratch.db.query("UPDATE metal_machines SET tenant_id = 'acme' WHERE node_id = $1", [machineId]);
    const wf = await run(
      [{ use: 'userdata.render' }, { use: 'deploy.deploy', on: 'ramdisk', with: { image: image.ref } }],
      {
        userData: { kind: 'cloud-init', template: 'test.cloud' },
      },
    );
    expect(wf.state).toBe('succeeded');
    const rendered = wf.steps[0]?.result as { userDataRef: string; kind: string };
    expect(await commandsOf(wf.id)).toEqual([
      {
        node_id: machineId,
        kind: 'deploy.image',
        key: `wf:${wf.id}:main.2#0:image`,
        target_node_id: null,
        state: 'succeeded',
        payload: {
          image: { url: image.url, digest: image.digest },
          userDataRef: rendered.userDataRef,
          userDataKind: 'cloud-init',
        },
      },
    ]);
    expect(wf.steps[1]?.result).toMatchObject({
      image: { ref: image.ref, digest: image.digest },
      userData: 'userdata.render',
    });
  });

  it('refuses an image whose signer was revoked since it was registered (verified again), sending nothing', async () => {
    const image = await catalogImage('root');
    await scratch.db.transaction((tx) => revokeImageSigner(tx, signers.root as string, { clock }));
    try {
      const wf = await run([{ use: 'deploy.deploy', on: 'ramdisk', with: { image: image.ref } }]);
      expect(wf.state).toBe('failed');
      expect(wf.steps[0]?.error?.code).toBe('PERMISSION_DENIED');
      expect(await commandsOf(wf.id)).toEqual([]);
    } finally {
      await scratch.db.query('UPDATE pki_image_signers SET revoked_at = NULL WHERE id = $1', [signers.root]);
    }
  });

  it('goes on with the image it sent when run again for the answer, resolving and verifying nothing again', async () => {
    const image = await catalogImage('root');
    const id = await start([{ use: 'deploy.deploy', on: 'ramdisk', with: { image: image.ref } }]);
    // Sent, not yet taken by the ramdisk (it is not polled).
    await drive([site]);
    expect((await commandsOf(id)).map((c) => [c.kind, c.state])).toEqual([['deploy.image', 'pending']]);
    // The signer revoked while the image is being written: the deploy verified it when it sent it, and the run for
    // the answer does not resolve it again.
    await scratch.db.transaction((tx) => revokeImageSigner(tx, signers.root as string, { clock }));
    try {
      await settle(compute, { clock, agents: [site, machine] });
      const wf = await getWorkflow(scratch.db, { workflowId: id });
      expect(wf.state).toBe('succeeded');
      expect(wf.steps[0]?.result).toMatchObject({ image: { ref: image.ref, digest: image.digest }, userData: null });
    } finally {
      await scratch.db.query('UPDATE pki_image_signers SET revoked_at = NULL WHERE id = $1', [signers.root]);
    }
  });

  it("the deploy request's image and user data win over the profile's, by reference only", async () => {
    const profileImage = await catalogImage('root');
    const stepImage = await catalogImage('root');
    const requested = await catalogImage('root');
    const document = '#cloud-config\npassword: hunter2\n';
    const userDataRef = await security.secrets(scratch.db).put('root', document);
    await scratch.db.query('UPDATE metal_machines SET deploy_request = $2::jsonb WHERE node_id = $1', [
      machineId,
      JSON.stringify({ profileId: 'whatever', image: requested.ref, userDataRef }),
    ]);
    profileCount += 1;
    const profile = {
      id: `test.p${profileCount}`,
      version: 1,
      target: 'metal',
      image: profileImage.ref,
      userData: { kind: 'cloud-init', template: 'test.cloud' },
      steps: [{ use: 'userdata.render' }, { use: 'deploy.deploy', on: 'ramdisk', with: { image: stepImage.ref } }],
    };
    // Metal's deploy starts the workflow with owner 'metal'.
    const id = await scratch.db.transaction(async (tx) => {
      await storeProfile(tx, { tenantId: 'root', profile }, clock.now());
      return (
        await compute.context.workflows!.start(tx, {
          tenantId: 'root',
          profileId: profile.id,
          profileVersion: 1,
          nodeId: machineId,
          owner: 'metal',
        })
      ).id;
    });
    await settle(compute, { clock, agents: [site, machine] });
    const wf = await getWorkflow(scratch.db, { workflowId: id });
    expect(wf.state).toBe('succeeded');
    const [command] = await commandsOf(id);
    expect(command?.payload).toEqual({
      image: { url: requested.url, digest: requested.digest },
      userDataRef,
      userDataKind: 'cloud-init',
    });
    expect(wf.steps[1]?.result).toMatchObject({ image: { ref: requested.ref }, userData: 'deploy' });
    // Neither the document nor its reference is in a step's result, an event or a log line.
    const { rows } = await scratch.db.query<{ t: string }>(
      `SELECT concat_ws(' ', (SELECT string_agg(s.result::text, ' ') FROM workflow_steps s WHERE s.workflow_id = $1),
         (SELECT string_agg(e::text, ' ') FROM events e)) AS t`,
      [id],
    );
    for (const text of [rows[0]?.t ?? '', logged.join('\n')]) {
      expect(text).not.toContain('hunter2');
      expect(text).not.toContain(userDataRef);
    }
  });

  it('a workflow metal did not start ignores the deploy request (the profile image, the rendered user data)', async () => {
    const profileImage = await catalogImage('root');
    const requested = await catalogImage('root');
    const userDataRef = await security.secrets(scratch.db).put('root', '#cloud-config\n');
    await scratch.db.query('UPDATE metal_machines SET deploy_request = $2::jsonb WHERE node_id = $1', [
      machineId,
      JSON.stringify({ profileId: 'whatever', image: requested.ref, userDataRef }),
    ]);
    const wf = await run([{ use: 'userdata.render' }, { use: 'deploy.deploy', on: 'ramdisk' }], {
      image: profileImage.ref,
      userData: { kind: 'cloud-init', template: 'test.cloud' },
    });
    expect(wf.state).toBe('succeeded');
    const [command] = await commandsOf(wf.id);
    expect(command?.payload).toMatchObject({
      image: { digest: profileImage.digest },
      userDataRef: (wf.steps[0]?.result as { userDataRef?: string } | undefined)?.userDataRef,
    });
    expect(command?.payload.userDataRef).not.toBe(userDataRef);
  });

  it('with no image anywhere it fails INVALID_CONFIG before sending', async () => {
    const wf = await run([{ use: 'deploy.deploy', on: 'ramdisk' }]);
    expect(wf.steps[0]?.error?.code).toBe('INVALID_CONFIG');
    expect(await commandsOf(wf.id)).toEqual([]);
  });
});

describe('the agent steps that await a rejoin', () => {
  it('node.reboot succeeds when the machine comes back with a new boot id', async () => {
    const before = await machine.connect();
    machine.respond('node.reboot', () => {
      void machine.rejoin({ role: 'node' });
      return { outcome: 'succeed' };
    });
    const wf = await run([{ use: 'node.reboot', on: 'node' }]);
    expect(wf.state).toBe('succeeded');
    expect(await commandsOf(wf.id)).toEqual([
      expect.objectContaining({ node_id: machineId, kind: 'node.reboot', key: `wf:${wf.id}:main.1` }),
    ]);
    expect(wf.steps[0]?.result).toEqual({ bootId: machine.bootId, role: 'node' });
    expect(machine.bootId).not.toBe(before.bootId);
  });

  it('node.reboot fails REJOIN_TIMEOUT when the machine does not come back', async () => {
    await machine.connect();
    const wf = await run([{ use: 'node.reboot', on: 'node', timeout: '5m' }]);
    expect(wf.state).toBe('failed');
    expect(wf.steps[0]?.error?.code).toBe('REJOIN_TIMEOUT');
  });

  const kexec = metalDeployImage.steps?.find((step) => step.use === 'boot.kexec') as ProfileStep;

  it('boot.kexec as metal.deploy-image writes it: the installed OS rejoins, and the power reset is not sent', async () => {
    await machine.connect();
    machine.respond('boot.kexec', () => {
      void machine.rejoin({ role: 'node' });
      return { outcome: 'succeed' };
    });
    const wf = await run([kexec]);
    expect(wf.state).toBe('succeeded');
    expect((await commandsOf(wf.id)).map((c) => c.kind)).toEqual(['boot.kexec']);
  });

  it("boot.kexec as metal.deploy-image writes it: no rejoin in 15 minutes is REJOIN_TIMEOUT, and the profile's BMC power reset is sent", async () => {
    await machine.connect();
    const wf = await run([kexec]);
    expect(wf.state).toBe('failed');
    expect(wf.steps.map((s) => [s.stepId, s.state, s.error?.code ?? null])).toEqual([
      ['main.1', 'failed', 'REJOIN_TIMEOUT'],
      ['main.1.on-failure', 'succeeded', null],
    ]);
    const commands = await commandsOf(wf.id);
    expect(commands.map((c) => [c.node_id, c.kind, c.payload.operation ?? null, c.payload.input ?? null])).toEqual([
      [machineId, 'boot.kexec', null, null],
      [site.nodeId, 'driver.invoke', 'power.setPower', { action: 'reset' }],
    ]);
  });
});

describe('health.resetGpus', () => {
  beforeEach(async () => {
    await scratch.db.query(`UPDATE nodes SET facts = jsonb_build_object('inventory', $2::jsonb) WHERE id = $1`, [
      machineId,
      JSON.stringify(INVENTORY),
    ]);
    await machine.connect();
  });

  it.each<[string, Record<string, Json>, Record<string, Json>]>([
    ['the listed GPUs of its inventory', { gpus: ['GPU-1', 'GPU-6'] }, { gpus: ['GPU-1', 'GPU-6'] }],
    ['all of them', {}, {}],
  ])('resets %s from the daemon, one keyed command', async (_name, input, payload) => {
    machine.respond('health.resetGpus', { outcome: 'succeed', result: { reset: 2 } });
    const wf = await run([{ use: 'health.resetGpus', on: 'node', with: input }]);
    expect(wf.state).toBe('succeeded');
    const commands = await commandsOf(wf.id);
    expect(commands).toEqual([
      {
        node_id: machineId,
        kind: 'health.resetGpus',
        key: `wf:${wf.id}:main.1#0:reset`,
        target_node_id: null,
        state: 'succeeded',
        payload,
      },
    ]);
    expect(wf.steps[0]?.result).toEqual({ commandId: expect.any(String), result: { reset: 2 } });
  });
});

describe('metal.talosReady', () => {
  it("polls the Talos API at the machine's first known address through the site agent until it answers", async () => {
    let calls = 0;
    site.respond('site.httpProxy', () => {
      calls += 1;
      return calls === 1
        ? { outcome: 'fail', reason: 'connection refused' }
        : { outcome: 'succeed', result: { status: 200, headers: {}, body: '{"version":"v1.9.2"}' } };
    });
    const wf = await run([{ use: 'metal.talosReady', on: 'site', timeout: '20m' }]);
    expect(wf.state).toBe('succeeded');
    expect(wf.steps[0]?.result).toEqual({ status: 200, address: '10.0.0.7' });
    const commands = await commandsOf(wf.id);
    expect(commands.map((c) => [c.node_id, c.target_node_id, c.key.split('#0:')[1], c.payload.url])).toEqual([
      [site.nodeId, machineId, 'http#0', 'https://10.0.0.7:50000/machine/version'],
      [site.nodeId, machineId, 'http#1', 'https://10.0.0.7:50000/machine/version'],
    ]);
  });

  it('brackets an IPv6 address and takes the port from the step', async () => {
    await scratch.db.query("UPDATE metal_machines SET addresses = '{fd00::7}' WHERE node_id = $1", [machineId]);
    site.respond('site.httpProxy', { outcome: 'succeed', result: { status: 200, body: 'ok' } });
    const wf = await run([{ use: 'metal.talosReady', on: 'site', with: { port: 50001 } }]);
    expect(wf.state).toBe('succeeded');
    const [command] = await commandsOf(wf.id);
    expect(command?.payload.url).toBe('https://[fd00::7]:50001/machine/version');
  });

  it('fails INVALID_STATE, sending nothing, when the control plane knows no address of the machine', async () => {
    await scratch.db.query("UPDATE metal_machines SET addresses = '{}' WHERE node_id = $1", [machineId]);
    const wf = await run([{ use: 'metal.talosReady', on: 'site' }]);
    expect(wf.steps[0]?.error).toMatchObject({ code: 'INVALID_STATE', reason: 'no-address' });
    expect(await commandsOf(wf.id)).toEqual([]);
  });
});

describe('profiles.render of the shipped profiles', () => {
  // One line per step, as an operator reads the plan: what, where, with what, and what the node's labels skip.
  const line = (step: RenderedStep) =>
    [
      `${step.stepId} ${step.name ?? '(no name)'}:`,
      `${step.action} on ${step.on ?? step.runsOn}`,
      Object.keys(step.with).length > 0 ? JSON.stringify(step.with) : '',
      step.await ? 'awaiting the rejoin' : '',
      step.onFailure === 'continue' ? '(may fail)' : '',
      step.willRun === false ? `skipped: ${step.when}` : '',
    ]
      .filter(Boolean)
      .join(' ');

  const PLANS: Record<string, string[]> = {
    'metal.enroll': ['main.1 BMC reachable: read the power state: power.getPower on site'],
    'metal.inspect': [
      'main.1 boot the ramdisk: metal.ensureRamdisk on site',
      'main.2 collect the hardware inventory: inspect.collect on ramdisk',
      'cleanup.1 power the machine off: power.setPower on site {"action":"off"} (may fail)',
    ],
    'metal.commission': [
      'main.1 boot the ramdisk: metal.ensureRamdisk on site',
      'main.2 collect the hardware inventory: inspect.collect on ramdisk',
      'main.3 read the firmware versions: firmware.getInventory on site (may fail)',
      'main.4 read the BIOS settings: bios.getSettings on site (may fail)',
      'main.5 GPU diagnostics (DCGM level 2): diag.dcgm on ramdisk {"level":2} skipped: gpu.count && gpu.count!=0',
      'main.6 burn-in (DCGM level 4): diag.dcgm on ramdisk {"level":4} skipped: gpu.count && gpu.count!=0',
      'main.7 acceptance: the hardware is all still there: inspect.collect on ramdisk',
      'cleanup.1 power the machine off: power.setPower on site {"action":"off"} (may fail)',
    ],
    'metal.release': [
      'main.1 boot the ramdisk: metal.ensureRamdisk on site',
      'main.2 wipe the disks: disk.wipe on ramdisk {"mode":"quick"}',
      'main.3 power the machine off: power.setPower on site {"action":"off"}',
    ],
    'metal.retire': ['main.1 power the machine off: power.setPower on site {"action":"off"}'],
    'metal.adopt': ['main.1 BMC reachable: read the power state: power.getPower on site'],
    'metal.deploy-image': [
      'main.1 boot the ramdisk: metal.ensureRamdisk on site',
      'main.2 render the user data: userdata.render on control-plane',
      'main.3 write the image and the user data: deploy.deploy on ramdisk',
      'main.4 boot from disk from now on: management.setBootDevice on site {"device":"disk","persistent":true}',
      'main.5 kexec into the installed OS: boot.kexec on ramdisk awaiting the rejoin',
      'main.6 wait for the installed OS\'s daemon: wait.agentJoined on control-plane {"role":"node"}',
      'main.5.on-failure (no name): power.setPower on site {"action":"reset"}',
    ],
    'metal.deploy-talos': [
      'main.1 boot the ramdisk: metal.ensureRamdisk on site',
      'main.2 render the Talos machine config: userdata.render on control-plane',
      'main.3 write the image and the machine config: deploy.deploy on ramdisk',
      'main.4 boot from disk from now on: management.setBootDevice on site {"device":"disk","persistent":true}',
      'main.5 boot Talos: power.setPower on site {"action":"cycle"}',
      'main.6 wait for the Talos API: metal.talosReady on site',
    ],
  };

  const RAMDISK = ['driver.invoke', 'site.bootEntry'];
  const KINDS: Record<string, string[]> = {
    'metal.enroll': ['driver.invoke'],
    'metal.inspect': ['driver.invoke', 'inspect.collect', 'site.bootEntry'],
    'metal.commission': ['diag.dcgm', 'driver.invoke', 'inspect.collect', 'site.bootEntry'],
    'metal.release': ['disk.wipe', ...RAMDISK],
    'metal.retire': ['driver.invoke'],
    'metal.adopt': ['driver.invoke'],
    'metal.deploy-image': ['boot.kexec', 'deploy.image', ...RAMDISK],
    'metal.deploy-talos': ['deploy.image', ...RAMDISK, 'site.httpProxy'],
  };

  it('covers every shipped profile', () => {
    expect(Object.keys(PLANS).sort()).toEqual(metalProfiles.map((p) => p.id).sort());
    expect(Object.keys(KINDS).sort()).toEqual(metalProfiles.map((p) => p.id).sort());
  });

  it.each(metalProfiles.map((p) => [p.id] as const))("%s reads as an operator's plan for a metal node", async (id) => {
    const token = await tokenFor(scratch.db, clock, 'root', ['compute:profiles:read']);
    const plan = await provisionApiOf(compute).profiles.render(token, {
      tenantId: 'root',
      profileId: id,
      nodeId: machineId,
    });
    expect(plan).toMatchObject({ tenantId: 'builtin', profileId: id, version: 1, nodeId: machineId });
    expect(plan.steps.map(line)).toEqual(PLANS[id]);
    // What a destructive batch for it would be scoped to, each kind declared by its steps.
    expect(plan.commandKinds).toEqual(KINDS[id]);
  });
});
