import { readFileSync, statSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { generateSigningKeyPair } from '@better-compute/pki';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, call, SERVER_DIR, type ServerProcess, startServer, tempDir } from './support/server-process';
import { openEvents } from './support/sse';

// The server as `pnpm start` runs it, in a child process on embedded PGlite in a temp data dir, over real HTTPS with
// the certificate its own CA issued; a plugin config module adds a plugin's and provision's own steps and profiles.

let server: ServerProcess;
let dir: Awaited<ReturnType<typeof tempDir>>;
/** Every secret value the file saw: none may appear in a log line. */
const secrets: string[] = [];

beforeAll(async () => {
  dir = await tempDir();
  server = await startServer({
    dataDir: dir.path,
    env: {
      BETTER_COMPUTE_CONFIG: join(SERVER_DIR, 'test/fixtures/compute.config.ts'),
      SSE_HEARTBEAT_MS: '200',
      SSE_POLL_MS: '100',
    },
  });
  secrets.push(server.adminToken ?? 'no admin token', readFileSync(join(dir.path, 'secret.key'), 'utf8').trim());
  secrets.push(readFileSync(join(dir.path, 'tls/server.key'), 'utf8').split('\n')[1] ?? 'no key line');
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await dir?.remove();
});

// One server process from its first start to its SIGTERM: the tests run in file order even when vitest shuffles.
describe('one server process', { shuffle: false }, () => {
  describe('first start', () => {
    it('prints its URLs and the root admin token once, and keeps the key file at 0600 beside the database', () => {
      expect(server.apiUrl).toMatch(/^https:\/\/localhost:\d+$/);
      expect(server.agentUrl).toMatch(/^https:\/\/localhost:\d+$/);
      expect(server.adminToken).toMatch(/^bc_[0-9a-z]{26}_[A-Za-z0-9_-]{43}$/);
      expect(server.stdout()).toContain(`${server.apiUrl}/v1/reference`);
      expect(server.stdout().split(server.adminToken as string)).toHaveLength(2);
      expect(statSync(join(dir.path, 'secret.key')).mode & 0o777).toBe(0o600);
      expect(statSync(join(dir.path, 'tls/server.key')).mode & 0o777).toBe(0o600);
    });
  });

  describe('the operator API over HTTPS', () => {
    it('answers a call with the admin token, and the documented errors otherwise', async () => {
      const ok = await api(server, 'sites.list', { tenantId: 'root' });
      expect(ok.status).toBe(200);
      expect(ok.json()).toHaveProperty('items');

      const wrong = await api(server, 'sites.list', { tenantId: 'root' }, `bc_${'0'.repeat(26)}_${'a'.repeat(43)}`);
      expect(wrong.status).toBe(401);
      expect(wrong.json()).toMatchObject({ code: 'UNAUTHENTICATED' });

      const unknown = await api(server, 'nothing.here', {});
      expect(unknown.status).toBe(404);
      expect(unknown.json()).toMatchObject({ code: 'NOT_FOUND' });

      const get = await call(`${server.apiUrl}/v1/sites.list`, { ca: server.ca });
      expect(get.status).toBe(405);
      expect(get.headers.allow).toBe('POST');

      const malformed = await call(`${server.apiUrl}/v1/sites.list`, {
        method: 'POST',
        headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
        body: '{"tenantId":',
        ca: server.ca,
      });
      expect(malformed.status).toBe(400);
      expect(malformed.json()).toMatchObject({ code: 'INVALID_INPUT', details: { reason: 'malformed-json' } });

      const large = await call(`${server.apiUrl}/v1/sites.list`, {
        method: 'POST',
        headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
        body: Buffer.alloc(1024 * 1024 + 1, 0x20),
        ca: server.ca,
      });
      expect(large.status).toBe(413);
      expect(large.json()).toEqual({
        code: 'INVALID_INPUT',
        message: 'the request body is larger than 1048576 bytes',
        details: { path: [], reason: 'body-too-large', limitBytes: 1048576 },
      });
    });

    it('echoes a request id, or makes one', async () => {
      const given = await call(`${server.apiUrl}/healthz`, {
        ca: server.ca,
        headers: { 'x-request-id': 'req-test-1' },
      });
      expect(given.headers['x-request-id']).toBe('req-test-1');
      const made = await call(`${server.apiUrl}/healthz`, { ca: server.ca });
      expect(made.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    });

    it('has no CORS unless CORS_ORIGINS is set', async () => {
      const preflight = await call(`${server.apiUrl}/v1/sites.list`, {
        method: 'OPTIONS',
        ca: server.ca,
        headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
      });
      expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
    });

    it('runs the plugin config module: its plugin and provision profiles are served', async () => {
      for (const profileId of ['acme.ubuntu', 'acme.talos', 'metal.commission']) {
        const found = await api(server, 'profiles.get', { tenantId: 'root', profileId });
        expect(found.status, profileId).toBe(200);
      }
    });
  });

  describe('health, metrics and documents', () => {
    it('answers /healthz, /readyz and /metrics with every metric named', async () => {
      expect((await call(`${server.apiUrl}/healthz`, { ca: server.ca })).json()).toEqual({ status: 'ok' });
      const ready = await call(`${server.apiUrl}/readyz`, { ca: server.ca });
      expect(ready.status).toBe(200);
      expect(ready.json()).toMatchObject({
        status: 'ready',
        checks: { database: 'ok', migrations: 'ok', leases: 'ok' },
      });
      const metrics = await call(`${server.apiUrl}/metrics`, { ca: server.ca });
      expect(metrics.status).toBe(200);
      expect(metrics.headers['content-type']).toMatch(/^text\/plain/);
      for (const name of [
        'better_compute_workflows',
        'better_compute_step_duration_seconds',
        'better_compute_work_queue_depth',
        'better_compute_work_queue_oldest_due_age_seconds',
        'better_compute_commands',
        'better_compute_agents_connected',
        'better_compute_leases_held',
        'better_compute_http_request_duration_seconds',
      ]) {
        expect(metrics.text, name).toContain(`# TYPE ${name} `);
      }
      expect(metrics.text).toMatch(/better_compute_leases_held [1-9]/);
      expect(metrics.text).toMatch(
        /better_compute_http_request_duration_seconds_count\{route="\/readyz",method="GET",code="200"\} 1/,
      );
    });

    it('serves the OpenAPI document and a reference page made from it', async () => {
      const doc = await call(`${server.apiUrl}/v1/openapi.json`, { ca: server.ca });
      expect(doc.status).toBe(200);
      const paths = doc.json().paths as Record<string, unknown>;
      expect(Object.keys(paths)).toEqual(
        expect.arrayContaining(['/v1/sites.list', '/v1/metal.list', '/v1/workflows.list']),
      );
      const page = await call(`${server.apiUrl}/v1/reference`, { ca: server.ca });
      expect(page.status).toBe(200);
      expect(page.headers['content-type']).toMatch(/^text\/html/);
      expect(page.text).toContain('<code>/v1/sites.list</code>');
      expect(page.text).toContain('compute:sites:read');
    });
  });

  describe('events over SSE', () => {
    const headers = () => ({ authorization: `Bearer ${server.adminToken}` });
    const createSite = async (name: string) => {
      const created = await api(server, 'sites.create', { tenantId: 'root', name });
      expect(created.status).toBe(200);
      return created.json().id as string;
    };

    it('refuses a wrong token and a malformed cursor', async () => {
      const wrong = await openEvents(`${server.apiUrl}/v1/events`, {
        ca: server.ca,
        headers: { authorization: 'Bearer nope' },
      });
      expect(wrong.status).toBe(401);
      expect(JSON.parse(wrong.body)).toMatchObject({ code: 'UNAUTHENTICATED' });
      const bad = await openEvents(`${server.apiUrl}/v1/events`, {
        ca: server.ca,
        headers: { ...headers(), 'last-event-id': 'ev1.garbage!' },
      });
      expect(bad.status).toBe(400);
    });

    it('streams events as the API creates them; a reconnect with Last-Event-ID sees every later event once, in order', async () => {
      const first = await openEvents(`${server.apiUrl}/v1/events?type=metal.site.created`, {
        ca: server.ca,
        headers: headers(),
      });
      expect(first.status).toBe(200);
      const ids = [await createSite('sse-1'), await createSite('sse-2')];
      const seen = await first.waitForEvents(2);
      expect(seen.map((e) => (e.data.data as { siteId: string }).siteId)).toEqual(ids);
      await first.waitForComment(/^heartbeat$/);
      first.close();

      // Created while no one listens.
      ids.push(await createSite('sse-3'), await createSite('sse-4'));
      const resumed = await openEvents(`${server.apiUrl}/v1/events?type=metal.site.created`, {
        ca: server.ca,
        headers: { ...headers(), 'last-event-id': seen[1]?.id as string },
      });
      ids.push(await createSite('sse-5'));
      const rest = await resumed.waitForEvents(3);
      // Nothing more arrives (no duplicate).
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(resumed.events).toHaveLength(3);
      expect(rest.map((e) => (e.data.data as { siteId: string }).siteId)).toEqual(ids.slice(2));
      resumed.close();

      // From the start, filtered by subject prefix: exactly the five sites' created events, in order.
      const all = await openEvents(`${server.apiUrl}/v1/events?from=start&subject=site/&type=metal.site.created`, {
        ca: server.ca,
        headers: headers(),
      });
      const everything = await all.waitForEvents(5);
      expect(everything.map((e) => (e.data.data as { siteId: string }).siteId)).toEqual(ids);
      const cursors = everything.map((e) => e.id);
      expect(new Set(cursors).size).toBe(5);
      all.close();
    });
  });

  describe('the agent API on the agent port', () => {
    it('a site agent joins with a token and then calls with the certificate it got (mTLS)', async () => {
      const siteId = (await api(server, 'sites.create', { tenantId: 'root', name: 'agents' })).json().id as string;
      const minted = await api(server, 'sites.joinToken', { tenantId: 'root', siteId });
      expect(minted.status).toBe(200);
      const token = minted.json().token as string;
      const key = generateSigningKeyPair('es256');
      secrets.push(token, key.privateKeyPem.split('\n')[1] ?? 'no key line');

      const joined = await call(`${server.agentUrl}/agent/v1/join`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token, publicKey: key.publicJwk }),
        ca: server.ca,
      });
      expect(joined.status, joined.text).toBe(200);
      const certificatePem = joined.json().certificatePem as string;
      expect(joined.json()).toMatchObject({ role: 'site', siteId });

      const anonymous = await call(`${server.agentUrl}/agent/v1/sessions.open`, {
        method: 'POST',
        body: JSON.stringify({ role: 'site', bootId: 'boot-1' }),
        ca: server.ca,
      });
      expect(anonymous.status).toBe(401);

      const session = await call(`${server.agentUrl}/agent/v1/sessions.open`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ role: 'site', bootId: 'boot-1' }),
        ca: server.ca,
        cert: certificatePem,
        key: key.privateKeyPem,
      });
      expect(session.status, session.text).toBe(200);
      expect(session.json()).toMatchObject({ nodeId: joined.json().nodeId, role: 'site' });
      const metrics = await call(`${server.apiUrl}/metrics`, { ca: server.ca });
      expect(metrics.text).toContain('better_compute_agents_connected{role="site"} 1');

      // The request id: a plain one the agent sends is kept and echoed, anything else is replaced.
      const agentTls = { ca: server.ca, cert: certificatePem, key: key.privateKeyPem };
      const spec = (requestId: string) =>
        call(`${server.agentUrl}/agent/v1/spec.get`, {
          method: 'POST',
          headers: { 'x-request-id': requestId },
          ...agentTls,
        });
      expect((await spec('agent-req-1')).headers['x-request-id']).toBe('agent-req-1');
      expect((await spec('no spaces or "quotes"')).headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);

      // A held poll whose agent goes away stops waiting then, not at its 20 s bound: its request line is logged at once.
      const held = httpsRequest(`${server.agentUrl}/agent/v1/commands.poll`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': 'held-poll-gone' },
        ...agentTls,
      });
      held.on('error', () => undefined);
      held.end(JSON.stringify({ waitMs: 20_000 }));
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(server.stderr()).not.toContain('"reqId":"held-poll-gone"');
      held.destroy();
      const until = Date.now() + 5_000;
      while (!server.stderr().includes('"reqId":"held-poll-gone"') && Date.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(server.stderr()).toContain('"reqId":"held-poll-gone"');
    });
  });

  describe('logs and shutdown', () => {
    it('writes JSON log lines with request ids and no token, key or secret value', () => {
      const lines = server.stderr().trim().split('\n');
      expect(lines.length).toBeGreaterThan(10);
      for (const line of lines) {
        const entry = JSON.parse(line) as Record<string, unknown>;
        if (entry.msg === 'request') expect(entry.reqId).toEqual(expect.any(String));
      }
      const leaked = lines.filter((line) => secrets.some((secret) => line.includes(secret)));
      expect(leaked).toEqual([]);
      expect(server.stderr()).not.toContain('Bearer');
    });

    it('stops on SIGTERM promptly with exit code 0', async () => {
      const started = Date.now();
      const code = await server.stop();
      expect(code).toBe(0);
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(server.stderr()).toContain('"msg":"stopped"');
    });
  });
});
