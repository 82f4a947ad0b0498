import { afterAll, beforeAll, expect, it } from 'vitest';
import { call, type ServerProcess, startServer, tempDir } from './support/server-process';

// /metrics is unauthenticated unless METRICS_TOKEN is set; then only a scraper with that bearer token reads it.

const token = 'scrape-6f1c2a9e4b7d0c3a8e5f';
let server: ServerProcess;
let dir: Awaited<ReturnType<typeof tempDir>>;

beforeAll(async () => {
  dir = await tempDir();
  server = await startServer({ dataDir: dir.path, env: { METRICS_TOKEN: token } });
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await dir?.remove();
});

it('with METRICS_TOKEN, /metrics answers only its bearer token; health stays open; the token is never logged', async () => {
  const scrape = (authorization?: string) =>
    call(`${server.apiUrl}/metrics`, { ca: server.ca, ...(authorization ? { headers: { authorization } } : {}) });
  for (const refused of [undefined, 'Bearer wrong-token-of-the-same-length-x', `Basic ${token}`, `Bearer ${token}x`]) {
    const answer = await scrape(refused);
    expect(answer.status, refused).toBe(401);
    expect(answer.headers['www-authenticate']).toBe('Bearer');
    expect(answer.json()).toMatchObject({ code: 'UNAUTHENTICATED' });
    expect(answer.text).not.toContain('better_compute_');
  }
  const allowed = await scrape(`Bearer ${token}`);
  expect(allowed.status).toBe(200);
  expect(allowed.text).toContain('better_compute_http_request_duration_seconds');
  expect((await call(`${server.apiUrl}/healthz`, { ca: server.ca })).status).toBe(200);
  expect(server.stderr()).not.toContain(token);
  expect(server.stdout()).not.toContain(token);
});
