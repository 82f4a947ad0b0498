import { createHash } from 'node:crypto';
import { definePlugin, manifest } from 'better-compute/core';
import { defineProfile, defineStep, renderTemplate } from 'better-compute/provision';
import { joinTokenIn, type MetalSim } from 'better-compute/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableMachines, cellsContaining, createSim, destructiveRunTwice, nodeEvents, ran } from './metal-sim';

// Walkthrough 1 (steps-and-profiles.md): renderAutoinstallIso and the Ubuntu profile exactly as the page writes them,
// shipped as a plugin, on the simulator: the installer ISO the step publishes is what the machine boots from virtual
// media, and the OS it installs joins with the token the step rendered into it.

// What the page leaves to the reader: the template and where the ISO goes (here, a map the simulated BMC reads).
const autoinstallTemplate = [
  '#cloud-config',
  'autoinstall:',
  '  version: 1',
  '  identity:',
  '    hostname: {{hostname}}',
  '  late-commands:',
  "    - curtin in-target -- sh -c 'install -m 0600 /dev/stdin /etc/bcd/join-token <<< {{joinToken}}'",
  '',
].join('\n');
const isos = new Map<string, string>();
const minted: string[] = [];
async function publishIso(digest: string, userData: string): Promise<void> {
  isos.set(`https://cache.site-a/autoinstall/${digest}.iso`, userData);
  minted.push(joinTokenIn(userData) as string);
}

// ---- from the page ----
export const renderAutoinstallIso = defineStep({
  id: 'autoinstall.renderIso',
  runsOn: 'control-plane',
  timeout: '5m',
  retrySafe: false,
  input: manifest({}),
  async run(_input, ctx) {
    const node = ctx.node!;
    const { token } = await ctx.sql.transaction((tx) =>
      ctx.pki!.issueJoinToken(tx, {
        tenantId: 'root',
        role: 'provisioned',
        siteId: node.siteId,
        ttlSeconds: 7200,
        maxUses: 1,
      }),
    );
    const userData = renderTemplate(autoinstallTemplate, { hostname: node.id.replace(/_/g, '-'), joinToken: token });
    const digest = createHash('sha256').update(userData).digest('hex');
    await publishIso(digest, userData); // your ISO build and storage behind the site cache
    return { url: `https://cache.site-a/autoinstall/${digest}.iso` };
  },
});

export const ubuntuAutoinstall = defineProfile({
  id: 'ubuntu-24.04-autoinstall',
  version: 1,
  target: 'metal',
  role: 'host',
  steps: [
    { use: 'autoinstall.renderIso' },
    { use: 'media.insert', on: 'site', with: { fromStep: 'autoinstall.renderIso' } },
    { use: 'management.setBootDevice', on: 'site', with: { device: 'cd' } },
    { use: 'power.setPower', on: 'site', with: { action: 'cycle' } },
    { use: 'wait.agentJoined', with: { role: 'node' } },
    { use: 'media.eject', on: 'site' },
  ],
});

const acmeAutoinstall = definePlugin({
  id: 'acme-autoinstall',
  extensions: [renderAutoinstallIso],
  profiles: [ubuntuAutoinstall],
});
// ---- end of the page's code ----

const LOOPS = 20;
const MACHINES = 2;

describe('walkthrough 1: Ubuntu autoinstall on the simulator', () => {
  let sim: MetalSim;
  beforeAll(async () => {
    sim = await createSim({
      plugins: [acmeAutoinstall],
      // The installer on the ISO writes Ubuntu with bcd, which joins with the token the ISO carries.
      install: (source) =>
        source.from === 'media' ? { os: 'bcd', joinToken: joinTokenIn(isos.get(source.url)) } : undefined,
    });
  });
  afterAll(() => sim.close());

  it(`deploys and releases ${MACHINES} machines ${LOOPS} times, every node back to available, no secret kept`, async () => {
    const site = await sim.addSite();
    const machines = await availableMachines(sim, site, MACHINES);
    for (let loop = 0; loop < LOOPS; loop += 1) {
      for (const machine of machines) {
        await sim.api.metal.deploy(sim.token, {
          tenantId: 'root',
          nodeId: machine.nodeId!,
          profileId: 'ubuntu-24.04-autoinstall',
        });
      }
      await sim.settle();
      for (const machine of machines) {
        const view = await sim.get(machine);
        expect(view.state, `loop ${loop}: ${JSON.stringify(view.lastError)}`).toBe('deployed');
        // The installed OS re-keyed the same node (the token remembered it) and came back as the node's daemon.
        expect(machine.agent.role).toBe('node');
        expect(machine.bmc.media).toEqual({});
        await sim.api.metal.release(sim.token, { tenantId: 'root', nodeId: machine.nodeId! });
      }
      await sim.settle();
      for (const machine of machines) {
        const view = await sim.get(machine);
        expect(view.state, `loop ${loop}: ${JSON.stringify(view.lastError)}`).toBe('available');
        expect(machine.bmc.power).toBe('off');
      }
    }
    const [first] = machines;
    const events = await nodeEvents(sim, first!);
    expect(events.filter((e) => e === 'metal.node.deployed')).toHaveLength(LOOPS);
    expect(events.at(-1)).toBe('metal.node.available');
    // The last loop as the site agent and the machine saw it: the ISO in, boot from it once (the OS joins), the ISO
    // out; then the release: PXE into the ramdisk (a boot entry per MAC), the signed wipe, power off.
    expect(ran(sim, first).slice(-11)).toEqual([
      'site virtual-media.insert succeed',
      'site management.setBootDevice succeed',
      'site power.setPower succeed',
      'site virtual-media.eject succeed',
      'site management.setBootDevice succeed',
      'site site.bootEntry succeed',
      'site site.bootEntry succeed',
      'site site.bootEntry succeed',
      'site power.setPower succeed',
      'ramdisk disk.wipe succeed',
      'site power.setPower succeed',
    ]);
    expect(destructiveRunTwice(sim)).toEqual([]);

    // No token or user data in any table, event or log: only references and token ids travel.
    expect(minted).toHaveLength(LOOPS * MACHINES);
    const secrets = [
      ...minted.map((token) => token.split('.')[1] as string),
      ...[...isos.values()],
      ...sim.fetchedSecrets.map((value) => (joinTokenIn(value) ? (value.split('.')[1] as string) : value)),
    ];
    expect(secrets.length).toBeGreaterThan(LOOPS * MACHINES * 2);
    expect(await cellsContaining(sim.database, secrets)).toEqual([]);
    expect(sim.logs.filter((line) => secrets.some((secret) => line.includes(secret)))).toEqual([]);
  }, 300_000);
});
