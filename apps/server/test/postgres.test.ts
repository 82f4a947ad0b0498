import { randomBytes } from 'node:crypto';
import { createScratchDatabase, type ScratchDatabase } from '@better-compute/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, call, type ServerProcess, startServer, tempDir } from './support/server-process';

// Several processes on one PostgreSQL database, started at once: each migrates (the kernel's advisory lock lets one
// apply and the others find nothing to do) and comes up; one root admin is created among them; the roles split the
// API from the workers; TLS=off serves the operator API as plain HTTP; SIGTERM releases the worker's leases.

const url = process.env.TEST_DATABASE_URL;

// The three processes' life in order (up, serving, stopped by SIGTERM): the tests run in file order even when
// vitest shuffles.
describe.skipIf(url === undefined)('on PostgreSQL, by role', { shuffle: false }, () => {
  let scratch: ScratchDatabase;
  const dirs: Awaited<ReturnType<typeof tempDir>>[] = [];
  let servers: ServerProcess[] = [];

  beforeAll(async () => {
    scratch = await createScratchDatabase({ url: url as string });
    const key = randomBytes(32).toString('hex');
    const started = await Promise.allSettled(
      ['all', 'api', 'worker'].map(async (role) => {
        const dir = await tempDir();
        dirs.push(dir);
        return startServer({
          dataDir: dir.path,
          env: {
            DATABASE_URL: scratch.url as string,
            BETTER_COMPUTE_SECRET_KEY: key,
            ROLE: role,
            SHARDS: '16',
            // The api process serves its operator API as plain HTTP (behind a proxy); its agent port stays TLS.
            ...(role === 'api' ? { TLS: 'off' } : {}),
          },
        });
      }),
    );
    servers = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
    const failed = started.flatMap((result) => (result.status === 'rejected' ? [String(result.reason)] : []));
    expect(failed).toEqual([]);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    await scratch?.drop();
    await Promise.all(dirs.map((dir) => dir.remove()));
  });

  it('all three came up; exactly one printed a root admin token, which every API process accepts', async () => {
    const [all, apiOnly, worker] = servers as [ServerProcess, ServerProcess, ServerProcess];
    const tokens = servers.flatMap((server) => (server.adminToken ? [server.adminToken] : []));
    expect(tokens).toHaveLength(1);
    expect(worker.adminToken).toBeUndefined();
    for (const server of [all, apiOnly]) {
      const answer = await api(server, 'sites.list', { tenantId: 'root' }, tokens[0]);
      expect(answer.status).toBe(200);
    }
    const { rows } = await scratch.db.query<{ n: string }>(
      "SELECT count(*) AS n FROM credentials WHERE tenant_id = 'root' AND name = 'root admin'",
    );
    expect(Number(rows[0]?.n)).toBe(1);
  });

  it('the api role serves the APIs without workers; the worker role serves health only and holds leases', async () => {
    const [, apiOnly, worker] = servers as [ServerProcess, ServerProcess, ServerProcess];
    expect(apiOnly.apiUrl).toMatch(/^http:\/\//);
    expect(apiOnly.agentUrl).toMatch(/^https:\/\//);
    const apiReady = (await call(`${apiOnly.apiUrl}/readyz`, { ca: apiOnly.ca })).json();
    expect(apiReady).toMatchObject({ status: 'ready' });
    expect(apiReady.checks).not.toHaveProperty('leases');
    expect(await call(`${apiOnly.apiUrl}/metrics`, { ca: apiOnly.ca }).then((m) => m.text)).toMatch(
      /better_compute_leases_held 0/,
    );

    expect(worker.agentUrl).toBeUndefined();
    const deadline = Date.now() + 10_000;
    let ready = await call(`${worker.apiUrl}/readyz`, { ca: worker.ca });
    while (ready.status !== 200 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      ready = await call(`${worker.apiUrl}/readyz`, { ca: worker.ca });
    }
    expect(ready.json()).toMatchObject({ status: 'ready', checks: { leases: 'ok', migrations: 'ok' } });
    const onWorker = await api(worker, 'sites.list', { tenantId: 'root' }, 'bc_x');
    expect(onWorker.status).toBe(404);
  });

  it('SIGTERM stops each with exit code 0 and the workers release their leases', async () => {
    const codes = await Promise.all(servers.map((server) => server.stop()));
    expect(codes).toEqual([0, 0, 0]);
    const { rows } = await scratch.db.query<{ n: string }>(
      'SELECT count(*) AS n FROM shard_leases WHERE worker_id IS NOT NULL AND expires_at > now()',
    );
    expect(Number(rows[0]?.n)).toBe(0);
  });
});
