import { createHash, randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { metal } from '@better-compute/metal';
import { generateSigningKeyPair, imageSigningBytes, signToBase64Url } from '@better-compute/pki';
import {
  createHttpSimSite,
  createScratchDatabase,
  type HttpSimSite,
  type ScratchDatabase,
} from '@better-compute/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIMULATED_IMAGE, simulatedUserData } from '../src/simulate';
import { api, type ServerProcess, startServer, tempDir } from './support/server-process';

// End to end on PostgreSQL: the server runs as child processes; a simulated site's agents (createHttpSimSite) run in
// this test process and speak the agent API over HTTPS, so they outlive a server that is killed. Machines are enrolled,
// commissioned, deployed and released through the operator API over HTTP.
// 1. SIGKILL of the only server mid-deploy, then a restart on the same ports: every machine finishes; no destructive
//    command key ran twice on the agents.
// 2. Two worker processes beside an api process; SIGTERM one mid-deploy: it exits 0, its leases are released and the
//    other worker holds every shard shortly after; the run completes.

const url = process.env.TEST_DATABASE_URL;
const SHARDS = 16;
const MACHINES = 3;
// A boot in real time; the simulated agents retry a join, a session and every report until the server answers.
const BOOT_MS = 3_000;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

const destructiveKinds = new Set(
  (metal().commandKinds ?? []).filter((kind) => kind.destructive === true).map((kind) => kind.name),
);

// One story on shared server processes and a simulated site: the second run starts from the fleet the first left,
// so the tests run in file order even when vitest shuffles.
describe.skipIf(url === undefined)(
  'end to end on PostgreSQL, server processes and a simulated site over HTTP',
  { shuffle: false },
  () => {
    let scratch: ScratchDatabase;
    const dirs: Awaited<ReturnType<typeof tempDir>>[] = [];
    const servers: ServerProcess[] = [];
    let site: HttpSimSite | undefined;
    const simLog: string[] = [];
    let token: string;
    let ca: string;
    let imageRef: string;
    const nodeIds: string[] = [];
    let baseEnv: Record<string, string>;
    let apiPort: number;
    let agentPort: number;
    let dataDir: string;

    // Calls go to whichever server serves the operator API now.
    let apiServer: ServerProcess;
    const call = async (method: string, body: object) => {
      const answer = await api(apiServer, method, { tenantId: 'root', ...body }, token);
      if (answer.status !== 200) throw new Error(`${method}: ${answer.status} ${answer.text}`);
      return answer.json();
    };
    const states = async () =>
      Promise.all(nodeIds.map(async (nodeId) => (await call('metal.get', { nodeId })).state as string));
    const allIn = (wanted: string) => async () => (await states()).every((state) => state === wanted);
    const destructiveRuns = () =>
      (site?.commands ?? [])
        .filter((c) => c.destructive && c.outcome !== undefined)
        .map((c) => `${c.agentNodeId} ${c.key}`);

    beforeAll(async () => {
      scratch = await createScratchDatabase({ url: url as string });
      const dir = await tempDir('bc-e2e-');
      dirs.push(dir);
      dataDir = join(dir.path, 'data');
      // The built-in cloud-init template's variables, as a real server's config module gives them; the simulated OS
      // joins by itself, so placeholders do.
      const configModule = join(dir.path, 'compute.config.mjs');
      await writeFile(
        configModule,
        `export default ${JSON.stringify({ provision: { userData: simulatedUserData('https://localhost:8444') } })};\n`,
      );
      [apiPort, agentPort] = [await freePort(), await freePort()];
      baseEnv = {
        DATABASE_URL: scratch.url as string,
        BETTER_COMPUTE_SECRET_KEY: randomBytes(32).toString('hex'),
        BETTER_COMPUTE_CONFIG: configModule,
        SHARDS: String(SHARDS),
        LOG_LEVEL: 'warn',
      };
      apiServer = await startServer({
        dataDir,
        env: { ...baseEnv, PORT: String(apiPort), AGENT_PORT: String(agentPort) },
      });
      servers.push(apiServer);
      token = apiServer.adminToken as string;
      ca = apiServer.ca;
      expect(token).toBeDefined();
      expect(apiServer.agentUrl).toBe(`https://localhost:${agentPort}`);

      // The demo image, signed by an allowlisted signer, as startSimulatedSite registers it, but over HTTP.
      imageRef = `${SIMULATED_IMAGE.name}@${SIMULATED_IMAGE.version}`;
      const key = generateSigningKeyPair('ed25519');
      await call('imageSigners.add', { name: 'e2e', publicKey: key.publicKeyPem });
      const digest = `sha256:${createHash('sha256').update(imageRef).digest('hex')}`;
      await call('images.register', {
        ...SIMULATED_IMAGE,
        digest,
        signature: signToBase64Url(key.privateKeyPem, imageSigningBytes(digest)),
        url: `https://images.simulated.invalid/${SIMULATED_IMAGE.name}/${SIMULATED_IMAGE.version}.img`,
      });
      const siteId = (await call('sites.create', { name: 'e2e' })).id as string;
      const joinToken = (await call('sites.joinToken', { siteId })).token as string;
      site = await createHttpSimSite({
        agentUrl: apiServer.agentUrl as string,
        ca,
        siteJoinToken: joinToken,
        machines: MACHINES,
        bootMs: BOOT_MS,
        isDestructive: (kind) => destructiveKinds.has(kind),
        log: (message) => simLog.push(message),
      });
    }, 60_000);

    afterAll(async () => {
      await site?.close();
      await Promise.all(servers.map((server) => server.stop()));
      await scratch?.drop();
      await Promise.all(dirs.map((dir) => dir.remove()));
    });

    it('enroll → commission → deploy → release over HTTP; SIGKILL mid-deploy and a restart: every machine finishes, no destructive command runs twice', {
      timeout: 150_000,
    }, async () => {
      for (const body of site?.enrollInputs() ?? []) nodeIds.push((await call('metal.enroll', body)).nodeId as string);
      expect(nodeIds).toHaveLength(MACHINES);
      await until('commissioned (available)', allIn('available'), 40_000);

      const before = destructiveRuns().length;
      for (const nodeId of nodeIds)
        await call('metal.deploy', { nodeId, profileId: 'metal.deploy-image', image: imageRef });
      // Mid-deploy, the moment an agent has run the deploy's first destructive command: its report, and other agents'
      // polls and reports, are in flight when the server dies; the agents send them again until the new server answers.
      await until('a destructive deploy command ran', async () => destructiveRuns().length > before, 20_000);
      const killed = servers.pop() as ServerProcess;
      killed.child.kill('SIGKILL');
      await killed.exited;

      // The same data dir, key and ports: the agents reconnect to the same URL, trusting the same CA.
      apiServer = await startServer({
        dataDir,
        env: { ...baseEnv, PORT: String(apiPort), AGENT_PORT: String(agentPort), SHUTDOWN_TIMEOUT_MS: '3000' },
      });
      servers.push(apiServer);
      expect(apiServer.adminToken).toBeUndefined();
      // The killed worker's leases expire (15 s) before the new one takes its shards.
      await until('deployed after the restart', allIn('deployed'), 50_000).catch(async (error) => {
        const views = await Promise.all(nodeIds.map((nodeId) => call('metal.get', { nodeId })));
        const { rows: failedSteps } = await scratch.db.query(
          "SELECT workflow_id, step_id, action, state, attempt, error FROM workflow_steps WHERE state = 'failed'",
        );
        console.log(
          views.map((view) => ({ state: view.state, lastError: view.lastError })),
          JSON.stringify(failedSteps),
          simLog.slice(-20),
          apiServer.stderr().slice(-4000),
          JSON.stringify(site?.commands.slice(-10)),
        );
        throw error;
      });

      for (const nodeId of nodeIds) await call('metal.release', { nodeId });
      await until('released', allIn('available'), 30_000);

      const runs = destructiveRuns();
      expect(runs.length).toBeGreaterThan(before);
      expect(runs.filter((run, i) => runs.indexOf(run) !== i)).toEqual([]);
    });

    it('two workers beside an api process; SIGTERM one mid-deploy: it exits 0, releases its leases, the other holds every shard at once and the run completes', {
      timeout: 90_000,
    }, async () => {
      const leases = async () =>
        (
          await scratch.db.query<{ worker_id: string; n: string }>(
            'SELECT worker_id, count(*) AS n FROM shard_leases WHERE worker_id IS NOT NULL AND expires_at > now() GROUP BY worker_id',
          )
        ).rows.map((row) => Number(row.n));
      // The all-in-one server stops gracefully (its leases released); an api process takes its ports, two workers start.
      const all = servers.pop() as ServerProcess;
      // Its exit code is not asserted: with the simulated agents still long-polling, its agent listener does not finish
      // closing and it exits at SHUTDOWN_TIMEOUT_MS (1) — but its workers have stopped and released their leases by then.
      await all.stop();
      expect(await leases()).toEqual([]);
      const [apiOnly, ...workers] = await Promise.all([
        startServer({
          dataDir,
          env: {
            ...baseEnv,
            ROLE: 'api',
            PORT: String(apiPort),
            AGENT_PORT: String(agentPort),
            SHUTDOWN_TIMEOUT_MS: '3000',
          },
        }),
        ...[1, 2].map(async (n) => {
          const dir = await tempDir(`bc-e2e-worker${n}-`);
          dirs.push(dir);
          return startServer({ dataDir: dir.path, env: { ...baseEnv, ROLE: 'worker' } });
        }),
      ]);
      servers.push(apiOnly as ServerProcess, ...workers);
      apiServer = apiOnly as ServerProcess;
      const [first, second] = workers as [ServerProcess, ServerProcess];

      await until('both workers hold leases', async () => (await leases()).length === 2, 20_000);
      expect((await leases()).reduce((a, b) => a + b, 0)).toBe(SHARDS);

      const before = destructiveRuns().length;
      for (const nodeId of nodeIds)
        await call('metal.deploy', { nodeId, profileId: 'metal.deploy-image', image: imageRef });
      await until('a deploy command ran', async () => destructiveRuns().length > before, 15_000);
      expect((await states()).every((state) => state === 'deployed')).toBe(false);

      const stoppedAt = Date.now();
      expect(await first.stop()).toBe(0);
      servers.splice(servers.indexOf(first), 1);
      // The stopped worker released its leases; the other takes every shard within a heartbeat, not a lease expiry.
      await until(
        'one worker holds every shard',
        async () => {
          const held = await leases();
          return held.length === 1 && held[0] === SHARDS;
        },
        10_000,
      );
      expect(Date.now() - stoppedAt).toBeLessThan(12_000);
      expect(second.child.exitCode).toBeNull();

      await until('deployed by the remaining worker', allIn('deployed'), 40_000);
      const runs = destructiveRuns();
      expect(runs.length).toBeGreaterThan(before);
      expect(runs.filter((run, i) => runs.indexOf(run) !== i)).toEqual([]);
    });
  },
);
