import { randomBytes } from 'node:crypto';
import { betterCompute, type Compute, field, type Json, manifest } from 'better-compute/core';
import { httpViaSite, metal, metalBmcTarget, metalProfiles } from 'better-compute/metal';
import { generateSigningKeyPair, type Pki, pki, type SigningKeyPair, signToBase64Url } from 'better-compute/pki';
import {
  defineStep,
  getWorkflow,
  type ProfileStep,
  provisionModule,
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
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type ScratchDatabase, scratchPglite } from './support/databases';

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

beforeAll(async () => {
  scratch = await scratchPglite();
  clock = createFakeClock();
  security = pki({ key: randomBytes(32), clock });
  const bareMetal = metal();
  // metal() registers metalExtensions (its steps and metalBmcTarget) once its module lists them; until then the driver
  // target rides on a module of its own here.
  const alreadyThere = (bareMetal.extensions as readonly { id: string }[]).some((e) => e.id === 'metal.bmc');
  const bmc = { id: 'metal-bmc', extensions: alreadyThere ? [] : [metalBmcTarget] };
  compute = await betterCompute({
    database: scratch.db,
    clock,
    modules: [security.module, provisionModule({ steps: [httpStep], modules: [bareMetal, bmc] }), bareMetal, bmc],
    pki: security.port(),
    secrets: security.secrets(scratch.db),
    attestation: security.attestation(),
  });
});
afterAll(async () => {
  await compute.close();
  await scratch.drop();
});

beforeEach(async () => {
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

  it('a re-run skips the commands already done (found by key), sending only what is missing', async () => {
    // The step runs again and again while its commands are open: each run finds what earlier runs sent (by key) and
    // sends only what comes next, minting a token only for a boot entry not sent yet.
    site.respond('driver.invoke', { outcome: 'ignore' });
    site.respond('site.bootEntry', { outcome: 'ignore' });
    const id = await start([{ use: 'metal.ensureRamdisk', on: 'site' }]);
    for (let i = 0; i < 5; i += 1) await drive([site]);
    expect((await commandsOf(id)).map((c) => c.key.split('#0:')[1])).toEqual(['boot-device']);
    site.respond('driver.invoke', { outcome: 'succeed' });
    await site.poll();
    for (let i = 0; i < 3; i += 1) await drive([site]);
    const keys = (await commandsOf(id)).map((c) => c.key.split('#0:')[1]);
    expect(keys).toEqual(['boot-device', `boot-entry:${MACS[0]}`, `boot-entry:${MACS[1]}`]);
    site.respond('site.bootEntry', { outcome: 'succeed' });
    await drive([site]);
    await machine.connect();
    await settle(compute, { clock, agents: [site, machine] });
    const commands = await commandsOf(id);
    expect(commands.map((c) => c.key.split('#0:')[1])).toEqual([
      'boot-device',
      `boot-entry:${MACS[0]}`,
      `boot-entry:${MACS[1]}`,
      'power-cycle',
    ]);
    expect((await getWorkflow(scratch.db, { workflowId: id })).state).toBe('succeeded');
    const { rows } = await scratch.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pki_join_tokens WHERE node_id = $1',
      [machineId],
    );
    expect(rows[0]?.n).toBe(2);
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
