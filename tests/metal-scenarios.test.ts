import type { MetalSim, SimMachine, SimSite } from 'better-compute/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableMachines, createSim, destructiveRunTwice, ran } from './extensions/metal-sim';

// workflows.md, "What the tests guarantee", on the simulator with metal's shipped profiles: a site agent that
// disappears mid-deploy holds its steps until it is back, then they finish without duplicates; a machine that never
// comes back after kexec fails the deploy with REJOIN_TIMEOUT after the onFailure BMC reset, and recover brings it
// back; and the other fault switches end where the pages say.

describe('metal on the simulator: faults mid-lifecycle', () => {
  let sim: MetalSim;
  let site: SimSite;
  let image: string;
  beforeAll(async () => {
    sim = await createSim();
    site = await sim.addSite();
    image = await sim.addImage({ name: 'ubuntu/noble', version: '24.04.1' });
  });
  afterAll(() => sim.close());

  const deploy = (machine: SimMachine) =>
    sim.api.metal.deploy(sim.token, {
      tenantId: 'root',
      nodeId: machine.nodeId!,
      profileId: 'metal.deploy-image',
      image,
    });

  /** Runs due work and polls the agents without moving the clock, until `done`. */
  async function driveUntil(done: () => boolean): Promise<void> {
    for (let i = 0; i < 500 && !done(); i += 1) {
      await sim.compute.runDueWork();
      for (const agent of site.agents) await agent.poll();
      for (const machine of sim.machines) if (machine.nodeId) await machine.agent.poll();
    }
    expect(done()).toBe(true);
  }

  /** Settles for at most `ms` of fake time (leaving later work queued). */
  async function settleFor(ms: number): Promise<void> {
    try {
      await sim.settle({ horizonMs: ms });
    } catch (error) {
      if (!(error instanceof Error && /past its horizon/.test(error.message))) throw error;
    }
  }

  it('a site agent offline mid-deploy holds the deploy until it is back, then it finishes without duplicates', async () => {
    const [machine] = await availableMachines(sim, site, 1);
    await deploy(machine!);
    // The ramdisk is up and writing the image: the site agent drops off the network.
    await driveUntil(() => machine!.running === 'ramdisk');
    site.offline();
    const sentBefore = sim.commands.length;
    await settleFor(5 * 60_000);
    const waiting = await sim.get(machine!);
    expect(waiting.state).toBe('deploying');
    expect(waiting.workflow?.state).toBe('running');
    // Its session went stale: nothing a site step needs was run meanwhile (only the ramdisk's own commands).
    expect(sim.commands.slice(sentBefore).every((c) => c.role !== 'site')).toBe(true);
    await site.online();
    await sim.settle();
    const done = await sim.get(machine!);
    expect(done.state, JSON.stringify(done.lastError)).toBe('deployed');
    expect(machine!.agent.role).toBe('node');
    expect(destructiveRunTwice(sim)).toEqual([]);
    const keys = sim.commands.map((c) => `${c.agentNodeId} ${c.key}`);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('metal.abort while the site agent is away cancels the BMC command it was sent: back online, it never runs it', async () => {
    const [machine] = await availableMachines(sim, site, 1);
    site.offline();
    await deploy(machine!);
    // The deploy's ramdisk step sends its one-time boot device to the site agent, which is not polling.
    const open = async () =>
      (
        await sim.database.query<{ id: string; state: string }>(
          `SELECT id, state FROM commands WHERE target_node_id = $1 ORDER BY created_at`,
          [machine!.nodeId],
        )
      ).rows.filter((c) => ['pending', 'dispatched', 'acked', 'running'].includes(c.state));
    for (let i = 0; i < 20 && (await open()).length === 0; i += 1) await sim.compute.runDueWork();
    const sent = await open();
    expect(sent.length).toBeGreaterThan(0);
    const ranBefore = ran(sim, machine).length;
    await sim.api.metal.abort(sim.token, { tenantId: 'root', nodeId: machine!.nodeId!, reason: 'wrong image' });
    expect(await open()).toEqual([]);
    await site.online();
    await sim.settle();
    expect((await sim.get(machine!)).state).toBe('failed');
    // The agent came back to find the command cancelled: nothing of the aborted deploy ran on the machine.
    expect(ran(sim, machine).slice(ranBefore)).toEqual([]);
    const { rows } = await sim.database.query<{ state: string; reason: string }>(
      'SELECT state, reason FROM commands WHERE id = ANY($1::text[])',
      [sent.map((c) => c.id)],
    );
    expect(rows.every((c) => c.state === 'cancelled' && c.reason === 'workflow aborted: wrong image')).toBe(true);
  });

  /** The secret references of the boot entries a workflow sent, and how many of those secrets are still stored. */
  async function bootEntrySecrets(workflowId: string): Promise<{ refs: string[]; stored: number }> {
    const { rows } = await sim.database.query<{ ref: string }>(
      `SELECT DISTINCT payload->>'tokenRef' AS ref FROM commands WHERE workflow_id = $1 AND kind = 'site.bootEntry'`,
      [workflowId],
    );
    const refs = rows.map((row) => row.ref);
    const { rows: kept } = await sim.database.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pki_secrets WHERE id = ANY($1::text[])',
      [refs],
    );
    return { refs, stored: kept[0]?.n ?? -1 };
  }

  it("metal.abort while the ramdisk step waits deletes its boot entries' secrets with the move", async () => {
    const [machine] = await availableMachines(sim, site, 1);
    site.offline();
    await deploy(machine!);
    const workflowId = (await sim.get(machine!)).workflow?.id as string;
    expect(workflowId).toMatch(/^wf_/);
    // The ramdisk step's sequence (boot device, a boot entry per MAC with its token's secret, power cycle) is sent.
    for (let i = 0; i < 20 && (await bootEntrySecrets(workflowId)).refs.length === 0; i += 1) {
      await sim.compute.runDueWork();
    }
    const before = await bootEntrySecrets(workflowId);
    expect(before.refs.length).toBeGreaterThan(0);
    expect(before.stored).toBe(before.refs.length);
    await sim.api.metal.abort(sim.token, { tenantId: 'root', nodeId: machine!.nodeId!, reason: 'wrong image' });
    expect(await bootEntrySecrets(workflowId)).toEqual({ refs: before.refs, stored: 0 });
    await site.online();
    await sim.settle();
    expect((await sim.get(machine!)).state).toBe('failed');
    expect((await bootEntrySecrets(workflowId)).stored).toBe(0);
  });

  it("a ramdisk that never joins fails the deploy at the step's deadline, and its boot entries' secrets go with the move", async () => {
    const [machine] = await availableMachines(sim, site, 1);
    machine!.faults.neverComesBack = true;
    try {
      await deploy(machine!);
      const workflowId = (await sim.get(machine!)).workflow?.id as string;
      await sim.settle();
      const failed = await sim.get(machine!);
      expect(failed).toMatchObject({ state: 'failed', lastError: { code: 'TIMEOUT', phase: 'deploying', workflowId } });
      const after = await bootEntrySecrets(workflowId);
      expect(after.refs.length).toBeGreaterThan(0);
      expect(after.stored).toBe(0);
    } finally {
      machine!.faults.neverComesBack = false;
    }
  });

  it('a machine that never comes back after kexec: REJOIN_TIMEOUT, the onFailure power reset, failed; recover deploys it', async () => {
    const [machine] = await availableMachines(sim, site, 1);
    await deploy(machine!);
    await driveUntil(() => machine!.running === 'ramdisk');
    machine!.faults.neverComesBack = true;
    await sim.settle();
    const failed = await sim.get(machine!);
    expect(failed.state).toBe('failed');
    expect(failed.lastError).toMatchObject({ code: 'REJOIN_TIMEOUT', phase: 'deploying' });
    expect(machine!.running).toBe('none');
    const reset = sim.commands.filter(
      (c) => c.targetNodeId === machine!.nodeId && c.operation === 'power.setPower' && c.key.includes('on-failure'),
    );
    expect(reset.map((c) => c.payload)).toEqual([expect.objectContaining({ input: { action: 'reset' } })]);
    expect(ran(sim, machine).slice(-2)).toEqual(['ramdisk boot.kexec succeed', 'site power.setPower succeed']);

    machine!.faults.neverComesBack = false;
    await sim.api.metal.recover(sim.token, { tenantId: 'root', nodeId: machine!.nodeId! });
    await sim.settle();
    const recovered = await sim.get(machine!);
    expect(recovered.state, JSON.stringify(recovered.lastError)).toBe('deployed');
    expect(machine!.agent.role).toBe('node');
    expect(destructiveRunTwice(sim)).toEqual([]);
  });

  it('an unreachable BMC fails the enroll; recover enrolls it once the BMC answers', async () => {
    const machine = sim.addMachine(site);
    machine.faults.bmcUnreachable = true;
    await sim.enroll(machine);
    await sim.settle();
    const failed = await sim.get(machine);
    expect(failed).toMatchObject({ state: 'failed', lastError: { code: 'DRIVER_ERROR', phase: 'enrolling' } });
    // power.getPower was tried three times (retries: 2), each a new key.
    expect(ran(sim, machine)).toEqual(Array(3).fill('site power.getPower fail'));
    machine.faults.bmcUnreachable = false;
    await sim.api.metal.recover(sim.token, { tenantId: 'root', nodeId: machine.nodeId! });
    await sim.settle();
    expect((await sim.get(machine)).state).toBe('available');
    expect((await sim.get(machine)).labels).toMatchObject({ 'gpu.model': 'H100', 'gpu.count': '8', nvswitch: 'true' });
  });

  it('a tampered wipe signature fails the release (DRIVER_ERROR); a hung command fails at its deadline', async () => {
    const [machine] = await availableMachines(sim, site, 1);
    await deploy(machine!);
    await sim.settle();
    expect((await sim.get(machine!)).state).toBe('deployed');
    machine!.faults.tamperSignature = true;
    await sim.api.metal.release(sim.token, { tenantId: 'root', nodeId: machine!.nodeId! });
    await sim.settle();
    expect(await sim.get(machine!)).toMatchObject({
      state: 'failed',
      lastError: { code: 'DRIVER_ERROR', phase: 'releasing' },
    });
    machine!.faults.tamperSignature = false;
    machine!.hang('disk.wipe');
    await sim.api.metal.recover(sim.token, { tenantId: 'root', nodeId: machine!.nodeId! });
    await sim.settle();
    expect(await sim.get(machine!)).toMatchObject({ state: 'failed', lastError: { phase: 'releasing' } });
    expect(
      sim.commands.filter((c) => c.kind === 'disk.wipe' && c.agentNodeId === machine!.nodeId).map((c) => c.outcome),
    ).toEqual(['succeed', 'hang']);
    await sim.api.metal.recover(sim.token, { tenantId: 'root', nodeId: machine!.nodeId! });
    await sim.settle();
    expect((await sim.get(machine!)).state).toBe('available');
  });
});
