import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createHttpAgent } from '@better-compute/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, type ServerProcess, spawnServer, startServer, tempDir } from './support/server-process';

// `pnpm start --simulate N` as a newcomer runs it: the server process starts a simulated site whose agents speak the
// agent API over HTTPS, and the README's walk-through (enroll from the written bodies, deploy the demo image,
// release) goes through the operator API alone.

let dir: Awaited<ReturnType<typeof tempDir>>;
let server: ServerProcess;

beforeAll(async () => {
  dir = await tempDir();
  server = await startServer({ dataDir: dir.path, args: ['--simulate', '1'] });
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await dir?.remove();
});

async function stateOf(nodeId: string): Promise<string> {
  const answer = await api(server, 'metal.get', { tenantId: 'root', nodeId });
  return answer.json().state as string;
}

async function waitForState(nodeId: string, wanted: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  let state = await stateOf(nodeId);
  while (state !== wanted) {
    if (Date.now() > deadline || state === 'failed') throw new Error(`node ${nodeId} is ${state}, not ${wanted}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
    state = await stateOf(nodeId);
  }
}

// One server process with its simulated site, from its banner to its SIGTERM: the tests run in file order even when
// vitest shuffles.
describe('a server started with --simulate', { shuffle: false }, () => {
  it('prints the simulated site and writes the enroll bodies with mode 0600', () => {
    expect(server.stdout()).toMatch(/^ {2}simulated {4}site site_\S+: 1 machines, image ubuntu\/noble@\S+$/m);
    const file = join(dir.path, 'simulated-enroll.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toHaveLength(1);
  });

  it('enrolls, deploys the demo image and releases a simulated machine through the operator API', async () => {
    const [body] = JSON.parse(readFileSync(join(dir.path, 'simulated-enroll.json'), 'utf8')) as unknown[];
    const enrolled = await api(server, 'metal.enroll', body);
    expect(enrolled.status).toBe(200);
    const nodeId = enrolled.json().nodeId as string;
    await waitForState(nodeId, 'available');

    const image = /image (\S+)$/m.exec(server.stdout())?.[1];
    const deployed = await api(server, 'metal.deploy', {
      tenantId: 'root',
      nodeId,
      profileId: 'metal.deploy-image',
      image,
    });
    expect(deployed.status).toBe(200);
    await waitForState(nodeId, 'deployed');

    expect((await api(server, 'metal.release', { tenantId: 'root', nodeId })).status).toBe(200);
    await waitForState(nodeId, 'available');
  }, 90_000);

  it('stops on SIGTERM while an agent of another process keeps re-polling, exit 0 well before the deadline', async () => {
    const site = (await api(server, 'sites.create', { tenantId: 'root', name: 'poller' })).json();
    const { token } = (await api(server, 'sites.joinToken', { tenantId: 'root', siteId: site.id })).json();
    const agent = createHttpAgent({ baseUrl: server.agentUrl as string, ca: server.ca });
    await agent.join(token as string);
    await agent.openSession('site');
    let polling = true;
    // Re-polls at once on its keep-alive connection, as a real agent does: the connection is never idle.
    const loop = (async () => {
      while (polling) await agent.poll({ waitMs: 300 }).catch(() => undefined);
    })();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const started = Date.now();
    expect(await server.stop()).toBe(0);
    // SHUTDOWN_TIMEOUT_MS is 30 s: an agent re-polling on its keep-alive connection used to hold the listener open.
    expect(Date.now() - started).toBeLessThan(20_000);
    polling = false;
    await loop;
    // Its session went with the server; closing only drops the client's connections.
    await agent.close().catch(() => undefined);
  });

  it('refuses --simulate on a worker-only process, naming SIMULATE', async () => {
    const worker = spawnServer({ DATA_DIR: dir.path, ROLE: 'worker', SIMULATE: '2' });
    expect(await worker.exited).toBe(2);
    expect(worker.stderr()).toContain('SIMULATE needs role all or api');
  });
});
