import { randomBytes } from 'node:crypto';
import {
  type ApiClient,
  betterCompute,
  type Compute,
  createCredential,
  type RunningWorker,
} from '@better-compute/core';
import { type MetalApi, metal, type SitesApi } from '@better-compute/metal';
import { generateSigningKeyPair, imageSigningBytes, type Pki, pki, signToBase64Url } from '@better-compute/pki';
import { type ProvisionApi, provisionModule } from '@better-compute/provision';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createHttpSimSite,
  createScratchDatabase,
  type HttpSimSite,
  type ScratchDatabase,
  type ServedAgentApi,
  serveAgentApi,
} from '../src';

// The simulated site over the network: a real agent API behind TLS (as apps/server serves it), a compute whose
// workers run in real time, and a site agent, ramdisks and installed OSes that speak to it over HTTPS with their
// client certificates. Three machines go enroll → available → deploy → deployed → release → available.

let scratch: ScratchDatabase;
let compute: Compute;
let security: Pki;
let served: ServedAgentApi;
let key: Uint8Array;
let workers: RunningWorker[] = [];
let token: string;
let api: ApiClient<{ metal: MetalApi; sites: SitesApi } & ProvisionApi>;

beforeAll(async () => {
  scratch = await createScratchDatabase();
  key = new Uint8Array(randomBytes(32));
  security = pki({ key });
  const bareMetal = metal();
  const provision = provisionModule({
    userData: {
      controlPlaneUrl: 'https://cp.sim.example',
      bcdUrl: 'https://downloads.sim.example/bcd',
      bcdSha256: 'b'.repeat(64),
    },
    modules: [bareMetal],
  });
  compute = await betterCompute({
    database: scratch.db,
    modules: [security.module, provision, bareMetal],
    pki: security.port(),
    secrets: security.secrets(scratch.db),
    attestation: security.attestation(),
    workers: { pollMs: 100 },
  });
  api = compute.api as unknown as typeof api;
  await scratch.db.query(
    "INSERT INTO tenants (id, name, created_at) VALUES ('root', 'root', now()) ON CONFLICT DO NOTHING",
  );
  token = (
    await createCredential(scratch.db, {
      tenantId: 'root',
      name: 'test',
      permissions: ['compute:*'],
      clock: compute.context.clock,
    })
  ).token;

  served = await serveAgentApi({ compute, pki: security, key, agentApi: { longPollMaxMs: 5_000, recheckMs: 1_000 } });
  workers = await compute.startWorkers(1);
});

afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.stop()));
  await served?.close();
  await compute?.close();
  await scratch?.drop();
});

async function until(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

// One site's life (its machines through a lifecycle, an outage of the agent API, then closed): the tests run in file
// order even when vitest shuffles.
describe('createHttpSimSite', { shuffle: false }, () => {
  let site: HttpSimSite;
  const problems: string[] = [];

  it('enrolls, deploys and releases three machines entirely over the agent API', { timeout: 60_000 }, async () => {
    const created = await api.sites.create(token, { tenantId: 'root', name: 'http-sim' });
    const { token: siteJoinToken } = await api.sites.joinToken(token, { tenantId: 'root', siteId: created.id });
    const isDestructive = (kind: string) => compute.context.commandKinds.get(kind)?.definition.destructive === true;
    site = await createHttpSimSite({
      agentUrl: served.url,
      ca: served.ca,
      siteJoinToken,
      machines: 3,
      bootMs: 100,
      pollWaitMs: 4_000,
      isDestructive,
      log: (line) => problems.push(line),
    });
    expect(site.siteId).toBe(created.id);
    expect(site.siteAgent.role).toBe('site');

    // A signed image in root's catalog.
    const signer = generateSigningKeyPair('ed25519');
    await scratch.db.transaction((tx) =>
      security.addImageSigner(tx, { tenantId: null, public: true, name: 'http-sim', publicKey: signer.publicKeyPem }),
    );
    const digest = `sha256:${'c'.repeat(64)}`;
    await api.images.register(token, {
      tenantId: 'root',
      name: 'ubuntu/noble',
      version: '24.04.1',
      digest,
      signature: signToBase64Url(signer.privateKeyPem, imageSigningBytes(digest)),
      url: 'https://images.sim.example/noble.img',
    });

    const states = () =>
      Promise.all(nodeIds.map(async (nodeId) => (await api.metal.get(token, { tenantId: 'root', nodeId })).state));
    const all = (state: string) => async () => (await states()).every((s) => s === state);
    const nodeIds: string[] = [];
    for (const body of site.enrollInputs()) nodeIds.push((await api.metal.enroll(token, body)).nodeId);
    await until('available', all('available'), 25_000);
    expect(site.machines.map((m) => m.nodeId).sort()).toEqual([...nodeIds].sort());

    for (const nodeId of nodeIds) {
      await api.metal.deploy(token, {
        tenantId: 'root',
        nodeId,
        profileId: 'metal.deploy-image',
        image: 'ubuntu/noble@24.04.1',
      });
    }
    await until('deployed', all('deployed'), 25_000);
    // The server counts the installed OS's agent joined once its session is recorded; the simulated machine notes its
    // own session when the connect's answer reaches it, a moment later.
    await until('the OS agents connected', async () => site.machines.every((m) => m.agent.role === 'node'), 5_000);
    for (const machine of site.machines) {
      expect(machine.running).toBe('os');
      expect(machine.agent.role).toBe('node');
      expect(machine.disk.image?.digest).toBe(digest);
    }

    for (const nodeId of nodeIds) await api.metal.release(token, { tenantId: 'root', nodeId });
    await until('released', all('available'), 25_000);

    const commands = site.commands;
    // The wipes were signed with the ramdisk's key over HTTP and verified by the control plane.
    expect(commands.filter((c) => c.kind === 'disk.wipe' && c.outcome === 'succeed')).toHaveLength(3);
    const destructive = commands.filter((c) => c.destructive).map((c) => `${c.agentNodeId} ${c.key}`);
    expect(destructive.length).toBeGreaterThan(0);
    expect(new Set(destructive).size).toBe(destructive.length);
    const keys = commands.map((c) => `${c.agentNodeId} ${c.key}`);
    expect(new Set(keys).size).toBe(keys.length);
    expect(problems.filter((line) => /poll failed/.test(line))).toEqual([]);
  });

  it('keeps polling through an outage of the agent API, backing off, and resumes when it is back', async () => {
    const port = Number(new URL(served.url).port);
    const before = problems.length;
    await served.close();
    await until('failed polls', async () => problems.length - before >= 3, 10_000);
    const failures = problems.slice(before).filter((line) => line.startsWith('site agent: poll failed'));
    const waits = failures.map((line) => Number(/again in (\d+) ms/.exec(line)?.[1]));
    expect(waits.slice(0, 2)).toEqual([250, 500]);
    served = await serveAgentApi({
      compute,
      pki: security,
      key,
      port,
      agentApi: { longPollMaxMs: 5_000, recheckMs: 1_000 },
    });
    // Every agent with a session (the site agent, and the machines' ramdisks when they are up) holds a long poll on
    // the new server.
    const connected = 1 + site.machines.filter((m) => m.agent.session !== undefined).length;
    await until(`${connected} agents back`, async () => served.agentApi.waiting() === connected, 15_000);
  });

  it('closes every agent cleanly: their loops end and the site agent’s session is closed', async () => {
    const siteAgent = site.siteAgent;
    await site.close();
    expect(siteAgent.session).toBeUndefined();
    const { rows } = await scratch.db.query<{ n: string }>(
      'SELECT count(*) AS n FROM agent_sessions WHERE node_id = $1 AND closed_at IS NULL',
      [siteAgent.nodeId],
    );
    expect(Number(rows[0]?.n)).toBe(0);
  });
});
