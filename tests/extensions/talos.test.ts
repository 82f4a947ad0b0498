import { field, manifest } from 'better-compute/core';
import { httpViaSite, machineForStep } from 'better-compute/metal';
import { defineProfile, defineStep, getWorkflow } from 'better-compute/provision';
import type { MetalSim, SimMachine, SimSite } from 'better-compute/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableMachines, createSim, destructiveRunTwice, ran } from './metal-sim';

// The Talos walkthrough (steps-and-profiles.md, "Relaying under the quorum"): a plugin's wait.talosReady that asks the
// machine through httpViaSite, in a Talos deploy provision registers directly (provisionModule({ steps, profiles })),
// answered by the simulated machine once Talos boots from the disk the ramdisk wrote.

// ---- from the page (the `address` it leaves out is the machine's first known address) ----
const talosReady = defineStep({
  id: 'wait.talosReady',
  runsOn: 'control-plane',
  relays: ['site'],
  sends: ['site.httpProxy'], // httpViaSite enqueues site.httpProxy, a destructive kind
  timeout: '20m',
  retrySafe: true,
  input: manifest({ port: field.int({ min: 1, max: 65535 }).default(50000) }),
  async run(input, ctx) {
    const address = (await machineForStep(ctx, 'wait.talosReady')).addresses[0];
    const response = await httpViaSite(ctx, { url: `https://${address}:${input.port}/machine/version`, poll: true });
    return { status: response.status, version: JSON.parse(response.body).tag as string };
  },
});
// ---- end of the page's code ----

const acmeTalosTemplate = 'version: v1alpha1\nmachine:\n  type: worker\n  network:\n    hostname: {{hostname}}\n';

const talos = defineProfile({
  id: 'acme-talos',
  version: 1,
  target: 'metal',
  role: 'host',
  userData: { kind: 'talos', template: 'acme-talos.yaml' },
  steps: [
    { use: 'metal.ensureRamdisk', on: 'site' },
    { use: 'userdata.render' },
    { use: 'deploy.deploy', on: 'ramdisk' },
    { use: 'management.setBootDevice', on: 'site', with: { device: 'disk', persistent: true } },
    { use: 'power.setPower', on: 'site', with: { action: 'cycle' } },
    { use: 'wait.talosReady', on: 'site' },
  ],
});

// The same deploy with a one-minute budget for Talos to answer, for the test where it never does.
const talosHurried = defineProfile({
  ...talos,
  id: 'acme-talos-hurried',
  steps: [...(talos.steps ?? []).slice(0, -1), { use: 'wait.talosReady', on: 'site', timeout: '1m' }],
});

describe('the Talos walkthrough on the simulator', () => {
  let sim: MetalSim;
  let site: SimSite;
  let image: string;
  beforeAll(async () => {
    sim = await createSim({
      steps: [talosReady],
      profiles: [talos, talosHurried],
      provision: { userData: { templates: { 'acme-talos.yaml': acmeTalosTemplate } } },
    });
    site = await sim.addSite();
    image = await sim.addImage({ name: 'talos', version: 'v1.9.2' });
  });
  afterAll(() => sim.close());

  const deploy = (machine: SimMachine, profileId = 'acme-talos') =>
    sim.api.metal.deploy(sim.token, { tenantId: 'root', nodeId: machine.nodeId!, profileId, image });
  const talosWorkflow = async (machine: SimMachine) => {
    const view = await sim.get(machine);
    const { rows } = await sim.database.query<{ id: string }>(
      "SELECT id FROM workflows WHERE node_id = $1 AND profile_id LIKE 'acme-talos%' ORDER BY created_at DESC LIMIT 1",
      [machine.nodeId],
    );
    return { view, workflow: await getWorkflow(sim.database, { workflowId: rows[0]!.id }) };
  };

  it('deploys Talos and waits for its API through httpViaSite, answered by the machine', async () => {
    const [machine] = await availableMachines(sim, site, 1);
    await deploy(machine!);
    await sim.settle();
    const { view, workflow } = await talosWorkflow(machine!);
    expect(view.state, JSON.stringify(view.lastError)).toBe('deployed');
    expect(machine!.running).toBe('talos');
    expect(machine!.disk).toMatchObject({
      userDataKind: 'talos',
      userData: true,
      image: { digest: expect.any(String) },
    });
    expect(workflow.steps.at(-1)).toMatchObject({ action: 'wait.talosReady', state: 'succeeded' });
    expect(workflow.steps.at(-1)?.result).toEqual({ status: 200, version: 'v1.9.2' });
    // One request, from the site agent to the machine's own address on the Talos port.
    const proxied = sim.commands.filter((c) => c.kind === 'site.httpProxy' && c.targetNodeId === machine!.nodeId);
    expect(proxied).toEqual([
      expect.objectContaining({
        role: 'site',
        targetNodeId: machine!.nodeId,
        outcome: 'succeed',
        payload: expect.objectContaining({
          method: 'GET',
          url: `https://${machine!.spec.addresses[0]}:50000/machine/version`,
        }),
      }),
    ]);
    expect(ran(sim, machine).slice(-4)).toEqual([
      'ramdisk deploy.image succeed',
      'site management.setBootDevice succeed',
      'site power.setPower succeed',
      'site site.httpProxy succeed',
    ]);
  });

  it('polls until Talos answers (connection refused while it boots), each poll a fresh request', async () => {
    const [machine] = await availableMachines(sim, site, 1);
    machine!.fail('site.httpProxy', 'connection refused', 3);
    await deploy(machine!);
    await sim.settle();
    const { view, workflow } = await talosWorkflow(machine!);
    expect(view.state).toBe('deployed');
    const polls = sim.commands.filter((c) => c.kind === 'site.httpProxy' && c.targetNodeId === machine!.nodeId);
    expect(polls.map((c) => c.outcome)).toEqual(['fail', 'fail', 'fail', 'succeed']);
    expect(polls.map((c) => c.key.split(':').at(-1))).toEqual(['http#0', 'http#1', 'http#2', 'http#3']);
    expect(workflow.steps.at(-1)?.attempt).toBe(0);
    expect(destructiveRunTwice(sim)).toEqual([]);
  });

  it('fails the deploy at the step deadline when Talos never answers (the OS did not boot)', async () => {
    const [machine] = await availableMachines(sim, site, 1);
    machine!.fail('site.httpProxy', 'connection refused', 1_000);
    await deploy(machine!, 'acme-talos-hurried');
    await sim.settle();
    const { view } = await talosWorkflow(machine!);
    expect(view.state).toBe('failed');
    expect(view.lastError).toMatchObject({ code: 'TIMEOUT', phase: 'deploying' });
    const polls = sim.commands.filter((c) => c.kind === 'site.httpProxy' && c.targetNodeId === machine!.nodeId);
    expect(polls.length).toBeGreaterThan(3);
    expect(polls.every((c) => c.outcome === 'fail')).toBe(true);
  });
});
