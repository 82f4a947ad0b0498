import { connect as connectTcp, type Socket } from 'node:net';
import { generateSigningKeyPair } from '@better-compute/pki';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRaw, type RawConnection } from './support/hostile';
import { api, call, type ServerProcess, startServer, tempDir } from './support/server-process';
import { openEvents } from './support/sse';

// Issue 18, slow clients: a client that sends its headers byte by byte, or never finishes its body (slowloris), is cut
// off by the server's receive limit (REQUEST_TIMEOUT_MS, 2 s here) on both ports, while other requests keep being
// served promptly; many idle connections do not stop service; a long poll and an event stream, whose requests arrived
// whole, outlive the limit. One server child process on PGlite over real HTTPS, raw TLS and TCP sockets.

const LIMIT_MS = 2_000;
let server: ServerProcess;
let dir: Awaited<ReturnType<typeof tempDir>>;
let agent: { cert: string; key: string };

beforeAll(async () => {
  dir = await tempDir('bc-slow-');
  server = await startServer({
    dataDir: dir.path,
    env: { REQUEST_TIMEOUT_MS: String(LIMIT_MS), SSE_HEARTBEAT_MS: '500' },
  });
  const siteId = (await api(server, 'sites.create', { tenantId: 'root', name: 'slow' })).json().id as string;
  const token = (await api(server, 'sites.joinToken', { tenantId: 'root', siteId })).json().token as string;
  const key = generateSigningKeyPair('es256');
  const joined = await call(`${server.agentUrl}/agent/v1/join`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token, publicKey: key.publicJwk }),
    ca: server.ca,
  });
  expect(joined.status, joined.text).toBe(200);
  agent = { cert: joined.json().certificatePem as string, key: key.privateKeyPem };
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await dir?.remove();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Calls /healthz, an API method and an agent method `times` times while slow clients hang on; each must be prompt. */
async function expectPromptService(times: number): Promise<void> {
  for (let i = 0; i < times; i += 1) {
    const started = Date.now();
    const [health, listed, session] = await Promise.all([
      call(`${server.apiUrl}/healthz`, { ca: server.ca }),
      api(server, 'sites.list', { tenantId: 'root' }),
      call(`${server.agentUrl}/agent/v1/spec.get`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': '2' },
        body: '{}',
        ca: server.ca,
        cert: agent.cert,
        key: agent.key,
      }),
    ]);
    expect(health.status).toBe(200);
    expect(listed.status).toBe(200);
    expect(session.status, session.text).not.toBeGreaterThanOrEqual(500);
    expect(Date.now() - started).toBeLessThan(1_500);
    await sleep(200);
  }
}

/** Writes `text` one byte every `everyMs` until the connection closes or the text ends. */
async function dribble(connection: RawConnection, text: string, everyMs: number): Promise<void> {
  for (const char of text) {
    if (connection.isClosed()) return;
    connection.write(char);
    await sleep(everyMs);
  }
}

describe('slowloris', () => {
  it('headers sent byte by byte are cut off with 408 at the limit on both ports; others are served meanwhile', async () => {
    const head = `POST /v1/sites.list HTTP/1.1\r\nhost: localhost\r\nx-slow: ${'a'.repeat(500)}`;
    const slow = await Promise.all([
      openRaw(server.apiUrl, { ca: server.ca }),
      openRaw(server.agentUrl as string, { ca: server.ca }),
      openRaw(server.agentUrl as string, { ca: server.ca, cert: agent.cert, key: agent.key }),
    ]);
    const started = Date.now();
    const dribbling = slow.map((connection) => dribble(connection, head, 50));
    await expectPromptService(3);
    const closedAfter = await Promise.all(slow.map((connection) => connection.closed));
    await Promise.all(dribbling);
    for (const [i, connection] of slow.entries()) {
      expect(connection.received(), `connection ${i}`).toMatch(/^HTTP\/1\.1 408 /);
      expect(closedAfter[i], `connection ${i}`).toBeGreaterThanOrEqual(LIMIT_MS - 100);
      expect(closedAfter[i], `connection ${i}`).toBeLessThan(LIMIT_MS + 2_500);
    }
    expect(Date.now() - started).toBeLessThan(LIMIT_MS + 3_000);
  });

  it('a body that never finishes is cut off at the limit (authenticated: 504 TIMEOUT first), on both ports', async () => {
    const request = (path: string, headers: string) =>
      `POST ${path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n${headers}content-length: 1000\r\n\r\n{"tenantId":"ro`;
    const cases = [
      {
        url: server.apiUrl,
        tls: {},
        text: request('/v1/sites.list', `authorization: Bearer ${server.adminToken}\r\n`),
      },
      { url: server.apiUrl, tls: {}, text: request('/v1/sites.list', '') },
      { url: server.agentUrl as string, tls: {}, text: request('/agent/v1/join', '') },
      { url: server.agentUrl as string, tls: agent, text: request('/agent/v1/commands.poll', '') },
    ];
    const slow = await Promise.all(cases.map((c) => openRaw(c.url, { ca: server.ca, ...c.tls })));
    for (const [i, connection] of slow.entries()) connection.write(cases[i]?.text ?? '');
    // A trickle of body bytes does not extend the limit.
    const trickle = slow.map((connection) => dribble(connection, ' '.repeat(200), 100));
    await expectPromptService(3);
    const closedAfter = await Promise.all(slow.map((connection) => connection.closed));
    await Promise.all(trickle);
    const first = (connection: RawConnection) => /^HTTP\/1\.1 (\d{3})/.exec(connection.received())?.[1];
    // The operator API's own timeout answers the authenticated call; an unauthenticated one is refused at once.
    expect(first(slow[0] as RawConnection)).toBe('504');
    expect(slow[0]?.received()).toContain('"code":"TIMEOUT"');
    expect(first(slow[1] as RawConnection)).toBe('401');
    expect(first(slow[2] as RawConnection)).toBe('408');
    expect(first(slow[3] as RawConnection)).toBe('408');
    for (const [i, after] of closedAfter.entries()) {
      expect(after, `connection ${i}`).toBeLessThan(LIMIT_MS + 2_500);
    }
  });

  it('many idle connections, TLS or not even that, do not stop service, and the server closes them all at the limit', async () => {
    const idleTls = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        openRaw(i % 2 === 0 ? server.apiUrl : (server.agentUrl as string), { ca: server.ca }),
      ),
    );
    const idleTcp: Socket[] = [];
    const tcpClosedAfter: Promise<number>[] = [];
    for (let i = 0; i < 100; i += 1) {
      const target = new URL(i % 2 === 0 ? server.apiUrl : (server.agentUrl as string));
      const opened = Date.now();
      const socket = connectTcp({ host: target.hostname, port: Number(target.port) });
      socket.on('error', () => undefined);
      tcpClosedAfter.push(new Promise((resolve) => socket.once('close', () => resolve(Date.now() - opened))));
      idleTcp.push(socket);
    }
    await expectPromptService(4);
    const closedAfter = await Promise.all(idleTls.map((connection) => connection.closed));
    expect(Math.max(...closedAfter)).toBeLessThan(LIMIT_MS + 3_000);
    // A connection that never starts its TLS handshake is closed at the same limit, not Node's default 120 s.
    expect(Math.max(...(await Promise.all(tcpClosedAfter)))).toBeLessThan(LIMIT_MS + 3_000);
    await expectPromptService(1);
    for (const socket of idleTcp) socket.destroy();
  });
});

describe('what outlives the receive limit', () => {
  it('a long poll held past the limit answers normally', async () => {
    const started = Date.now();
    const polled = await call(`${server.agentUrl}/agent/v1/commands.poll`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ waitMs: LIMIT_MS + 700 }),
      ca: server.ca,
      cert: agent.cert,
      key: agent.key,
    });
    expect(polled.status, polled.text).toBe(200);
    expect(polled.json()).toEqual({ commands: [] });
    expect(Date.now() - started).toBeGreaterThanOrEqual(LIMIT_MS + 500);
  });

  it('an event stream stays open past the limit', async () => {
    const stream = await openEvents(`${server.apiUrl}/v1/events`, {
      ca: server.ca,
      headers: { authorization: `Bearer ${server.adminToken}` },
    });
    expect(stream.status).toBe(200);
    await sleep(LIMIT_MS + 500);
    const before = stream.comments.length;
    await stream.waitForComment(/^heartbeat$/);
    await sleep(600);
    expect(stream.comments.length).toBeGreaterThan(before);
    stream.close();
  });

  it('logged no 5xx other than the documented 504 TIMEOUT, and no unhandled error', () => {
    const lines = server
      .stderr()
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const bad = lines.filter(
      (entry) =>
        (typeof entry.status === 'number' && entry.status >= 500 && entry.status !== 504) ||
        entry.level === 'fatal' ||
        entry.msg === 'unhandled error' ||
        entry.msg === 'agent API: a call failed',
    );
    expect(bad).toEqual([]);
    expect(server.child.exitCode).toBeNull();
  });
});
