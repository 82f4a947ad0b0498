// The reference page's samples that use metal (tests/samples/metal/, one file per file the page names), imported from
// better-compute/* as a plugin author writes them, run on PGlite with FakeAgents answering the commands.
import { randomBytes } from 'node:crypto';
import { betterCompute, type Compute, type SqlDatabase } from 'better-compute/core';
import { createPgliteDatabase } from 'better-compute/core/pglite';
import { metal } from 'better-compute/metal';
import { pki } from 'better-compute/pki';
import { getWorkflow } from 'better-compute/provision';
import {
  createFakeAgent,
  createFakeClock,
  type FakeClock,
  insertNode,
  insertSite,
  settle,
} from 'better-compute/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { address } from './metal/acme-talos';
import { acmeAutoinstall, bareMetal, provision, provisionWithPlugin } from './metal/compute';
import { publishedIsos } from './metal/steps/render-iso';

let database: SqlDatabase;
let compute: Compute;
afterEach(async () => {
  await compute?.close();
  await database?.close();
});

/** A machine as metal enrolls one: a node of the site and its metal_machines row (BMC, MAC, known address). */
async function machineOf(clock: FakeClock, siteId: string): Promise<string> {
  const nodeId = await insertNode(database, { siteId }, clock);
  await database.query(
    `INSERT INTO metal_machines (node_id, tenant_id, site_id, bmc_address, bmc_driver, addresses, created_at, updated_at)
     VALUES ($1, 'root', $2, '10.1.0.7', 'redfish', $3::text[], $4, $4)`,
    [nodeId, siteId, [address], clock.now()],
  );
  await database.query("INSERT INTO metal_macs (mac, node_id) VALUES ('0c:42:a1:00:00:01', $1)", [nodeId]);
  return nodeId;
}

async function commandsOf(workflowId: string) {
  const { rows } = await database.query<{ kind: string; payload: Record<string, unknown>; target_node_id: string }>(
    'SELECT kind, payload, target_node_id FROM commands WHERE workflow_id = $1 ORDER BY created_at, id',
    [workflowId],
  );
  return rows;
}

describe('the metal samples of steps-and-profiles.md', () => {
  it("1. directly: provision registers acme-talos's wait.talosReady, which polls the machine through metal's httpViaSite", async () => {
    // httpViaSite judges agent sessions by the clock it is given; start the fake clock at the real time.
    const clock = createFakeClock(new Date());
    database = await createPgliteDatabase();
    // metal() brings the machine records httpViaSite checks addresses against.
    compute = await betterCompute({ database, clock, modules: [provision, metal()] });
    const siteId = await insertSite(database, {}, clock);
    const nodeId = await machineOf(clock, siteId);
    const site = createFakeAgent(compute, {
      nodeId: await insertNode(database, { siteId, kind: 'site-agent' }, clock),
      role: 'site',
    });
    await site.connect();
    let asked = 0;
    site.respond('site.httpProxy', () =>
      ++asked < 3
        ? { outcome: 'fail', reason: 'connection refused' }
        : { outcome: 'succeed', result: { status: 200, headers: {}, body: '{"version":"v1.9.2"}' } },
    );
    const { id } = await database.transaction((tx) =>
      compute.context.workflows!.start(tx, { tenantId: 'root', profileId: 'acme.talos', nodeId }),
    );
    await settle(compute, { clock, agents: [site] });
    const wf = await getWorkflow(database, { workflowId: id });
    expect(wf.state).toBe('succeeded');
    expect(wf.steps[0]?.result).toEqual({ status: 200 });
    expect(wf.commandKinds).toEqual(['site.httpProxy']);
    const commands = await commandsOf(id);
    expect(commands.map((c) => [c.kind, c.target_node_id, c.payload.url])).toEqual(
      Array.from({ length: 3 }, () => ['site.httpProxy', nodeId, `https://${address}:50000/machine/version`]),
    );
  });

  it('1. directly: an address the machine does not have is refused before anything is sent (SSRF)', async () => {
    const clock = createFakeClock(new Date());
    database = await createPgliteDatabase();
    compute = await betterCompute({ database, clock, modules: [provision, metal()] });
    const siteId = await insertSite(database, {}, clock);
    const nodeId = await machineOf(clock, siteId);
    await database.query("UPDATE metal_machines SET addresses = '{10.0.0.8}' WHERE node_id = $1", [nodeId]);
    const { id } = await database.transaction((tx) =>
      compute.context.workflows!.start(tx, { tenantId: 'root', profileId: 'acme.talos', nodeId }),
    );
    await settle(compute, { clock });
    const wf = await getWorkflow(database, { workflowId: id });
    expect(wf.steps[0]?.error).toMatchObject({ code: 'INVALID_INPUT', reason: 'ssrf' });
    expect(await commandsOf(id)).toEqual([]);
  });

  it('2. as a plugin: compute.ts with metal() installs the Ubuntu profile on a machine, its ISO rendered by render-iso.ts', async () => {
    const clock = createFakeClock(new Date());
    database = await createPgliteDatabase();
    const security = pki({ key: randomBytes(32).toString('hex'), clock });
    // Register the plugin with the server as well, the way metal is listed both in provisionModule({ modules }) and
    // in modules.
    compute = await betterCompute({
      database,
      clock,
      modules: [security.module, provisionWithPlugin, bareMetal],
      plugins: [acmeAutoinstall],
      pki: security.port(),
      secrets: security.secrets(database),
    });
    const siteId = await insertSite(database, {}, clock);
    const nodeId = await machineOf(clock, siteId);
    const site = createFakeAgent(compute, {
      nodeId: await insertNode(database, { siteId, kind: 'site-agent' }, clock),
      role: 'site',
    });
    // The installed OS: its daemon joins as a node once the machine power-cycled into the autoinstall ISO.
    const installed = createFakeAgent(compute, { nodeId, role: 'node' });
    await site.connect();
    site.respond('driver.invoke', (command) => {
      const { operation, input } = command.payload as { operation: string; input: { action?: string } };
      if (operation === 'power.setPower' && input.action === 'cycle') {
        clock.advance(1_000); // the machine reboots into the ISO (the installer's hour is not simulated here)
        void installed.connect();
      }
      return { outcome: 'succeed' };
    });
    const { id } = await database.transaction((tx) =>
      compute.context.workflows!.start(tx, { tenantId: 'root', profileId: 'ubuntu-24.04-autoinstall', nodeId }),
    );
    await settle(compute, { clock, agents: [site, installed] });
    const wf = await getWorkflow(database, { workflowId: id });
    expect(wf.state).toBe('succeeded');
    // The ISO this workflow published (the map may hold others' when files share a process).
    const iso = (wf.steps[0]?.result as { url?: string } | null)?.url ?? '';
    const digest = /autoinstall\/([0-9a-f]{64})\.iso$/.exec(iso)?.[1];
    expect(digest).toBeDefined();
    const userData = publishedIsos.get(digest ?? '');
    expect(userData).toContain(`hostname: ${nodeId.replace(/_/g, '-')}`);
    const commands = await commandsOf(id);
    expect(commands.map((c) => [c.kind, c.target_node_id, c.payload.operation, c.payload.input])).toEqual([
      ['driver.invoke', nodeId, 'virtual-media.insert', { url: iso, device: 'cd' }],
      ['driver.invoke', nodeId, 'management.setBootDevice', { device: 'cd', persistent: false }],
      ['driver.invoke', nodeId, 'power.setPower', { action: 'cycle' }],
      ['driver.invoke', nodeId, 'virtual-media.eject', { device: 'cd' }],
    ]);
    // The BMC each driver.invoke carries is the machine's, its driver the one it was enrolled with.
    expect(commands.every((c) => (c.payload.bmc as { address: string }).address === '10.1.0.7')).toBe(true);
    expect(commands.every((c) => (c.payload.driver as { name: string }).name === 'redfish')).toBe(true);
  });
});
