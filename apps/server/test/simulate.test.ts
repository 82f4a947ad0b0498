import { randomBytes } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import {
  type ApiClient,
  betterCompute,
  type Compute,
  createCredential,
  type RunningWorker,
} from '@better-compute/core';
import { type MetalApi, metal } from '@better-compute/metal';
import { type ImageSignersApi, type Pki, pki } from '@better-compute/pki';
import { provisionModule } from '@better-compute/provision';
import {
  createScratchDatabase,
  type ScratchDatabase,
  type ServedAgentApi,
  serveAgentApi,
} from '@better-compute/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SimulatedSite, simulatedUserData, startSimulatedSite } from '../src/simulate';
import { tempDir } from './support/server-process';

// `--simulate`: startSimulatedSite against a compute composed as the server composes it (pki, provision borrowing
// metal's profiles, metal) with the agent API over HTTPS; the machines enroll themselves and a deploy of the demo
// image and a release go through over the network.

let scratch: ScratchDatabase;
let compute: Compute;
let security: Pki;
let served: ServedAgentApi;
let workers: RunningWorker[] = [];
let adminToken: string;
let dir: Awaited<ReturnType<typeof tempDir>>;
const sites: SimulatedSite[] = [];

beforeAll(async () => {
  dir = await tempDir();
  scratch = await createScratchDatabase();
  const key = new Uint8Array(randomBytes(32));
  security = pki({ key });
  const bareMetal = metal();
  compute = await betterCompute({
    database: scratch.db,
    modules: [
      security.module,
      provisionModule({ userData: simulatedUserData('https://localhost:8444'), modules: [bareMetal] }),
      bareMetal,
    ],
    pki: security.port(),
    secrets: security.secrets(scratch.db),
    attestation: security.attestation(),
    workers: { pollMs: 100 },
  });
  await scratch.db.query(
    "INSERT INTO tenants (id, name, created_at) VALUES ('root', 'root', now()) ON CONFLICT DO NOTHING",
  );
  adminToken = (
    await createCredential(scratch.db, {
      tenantId: 'root',
      name: 'admin',
      permissions: ['compute:*'],
      clock: compute.context.clock,
    })
  ).token;
  served = await serveAgentApi({ compute, pki: security, key, agentApi: { longPollMaxMs: 5_000, recheckMs: 1_000 } });
  workers = await compute.startWorkers(1);
});

afterAll(async () => {
  for (const site of sites) await site.close();
  await Promise.all(workers.map((worker) => worker.stop()));
  await served?.close();
  await compute?.close();
  await scratch?.drop();
  await dir?.remove();
});

async function until(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

// The second start reuses what the first registered (the demo image, its signer): the tests run in file order even
// when vitest shuffles.
describe('startSimulatedSite', { shuffle: false }, () => {
  it('starts a site whose machines enroll themselves, deploy the demo image and release, over HTTPS', {
    timeout: 60_000,
  }, async () => {
    const api = compute.api as unknown as ApiClient<{ metal: MetalApi }>;
    const enrollFile = join(dir.path, 'simulated-enroll.json');
    const sim = await startSimulatedSite({
      compute,
      adminToken,
      agentUrl: served.url,
      ca: served.ca,
      machines: 2,
      enroll: true,
      enrollFile,
      bootMs: 100,
    });
    sites.push(sim);
    expect(sim.imageRef).toBe('ubuntu/noble@24.04.1-simulated');
    expect(sim.nodeIds).toHaveLength(2);
    expect(JSON.parse(readFileSync(enrollFile, 'utf8'))).toEqual(sim.enrollBodies);
    expect(statSync(enrollFile).mode & 0o777).toBe(0o600);
    expect(sim.banner.join('\n')).toContain(sim.siteId);

    const state = (nodeId: string) => api.metal.get(adminToken, { tenantId: 'root', nodeId }).then((m) => m.state);
    const all = (wanted: string) => async () => (await Promise.all(sim.nodeIds.map(state))).every((s) => s === wanted);
    await until('available', all('available'), 25_000);
    for (const nodeId of sim.nodeIds) {
      await api.metal.deploy(adminToken, {
        tenantId: 'root',
        nodeId,
        profileId: 'metal.deploy-image',
        image: sim.imageRef,
      });
    }
    await until('deployed', all('deployed'), 25_000);
    for (const nodeId of sim.nodeIds) await api.metal.release(adminToken, { tenantId: 'root', nodeId });
    await until('released', all('available'), 25_000);

    const destructive = sim.site.commands.filter((c) => c.destructive).map((c) => `${c.agentNodeId} ${c.key}`);
    expect(destructive.length).toBeGreaterThan(0);
    expect(new Set(destructive).size).toBe(destructive.length);
  });

  it('a second start (no admin token: its own credential, revoked at close) reuses the demo image and its signer, and leaves enrolling to the caller', async () => {
    const signers = compute.api as unknown as ApiClient<{ imageSigners: ImageSignersApi }>;
    const before = (await signers.imageSigners.list(adminToken, { tenantId: 'root' })).items.length;
    const sim = await startSimulatedSite({ compute, agentUrl: served.url, ca: served.ca, machines: 1 });
    expect(sim.imageRef).toBe(sites[0]?.imageRef);
    expect(sim.nodeIds).toEqual([]);
    expect(sim.enrollBodies).toEqual([expect.objectContaining({ siteId: sim.siteId, macs: [expect.any(String)] })]);
    expect(sim.siteId).not.toBe(sites[0]?.siteId);
    expect((await signers.imageSigners.list(adminToken, { tenantId: 'root' })).items).toHaveLength(before);
    const own = "SELECT revoked_at FROM credentials WHERE name = 'simulated-site'";
    expect((await scratch.db.query<{ revoked_at: Date | null }>(own)).rows).toEqual([{ revoked_at: null }]);
    await sim.close();
    expect((await scratch.db.query<{ revoked_at: Date | null }>(own)).rows).toEqual([{ revoked_at: expect.any(Date) }]);
  });
});
