import { execFileSync } from 'node:child_process';
import { randomBytes, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join as joinPath } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { betterCompute, type Compute, field, isComputeError, manifest } from '@better-compute/core';
import { type Pki, pki } from '@better-compute/pki';
import { type AgentApi, createAgentApi } from '@better-compute/pki/agent-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpAgent, createScratchDatabase, type HttpAgent, type ScratchDatabase } from '../src';

let scratch: ScratchDatabase;
let compute: Compute;
let security: Pki;
let api: AgentApi;
let server: Server;
let baseUrl: string;
let serverCa: string;

// A self-signed server certificate for 127.0.0.1, made with the openssl command line.
function serverCertificate(): { key: string; cert: string } {
  const folder = mkdtempSync(joinPath(tmpdir(), 'agent-api-tls-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1,DNS:localhost',
        '-keyout',
        joinPath(folder, 'key.pem'),
        '-out',
        joinPath(folder, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    return {
      key: readFileSync(joinPath(folder, 'key.pem'), 'utf8'),
      cert: readFileSync(joinPath(folder, 'cert.pem'), 'utf8'),
    };
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

// What the server does in front of the handler: the request as a fetch Request (aborted when the client goes away)
// and the client certificate the TLS socket saw, as PEM.
async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const aborted = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) aborted.abort();
  });
  const raw = (req.socket as TLSSocket).getPeerCertificate()?.raw;
  const certificatePem = raw ? new X509Certificate(raw).toString() : undefined;
  const request = new Request(`https://127.0.0.1${req.url}`, {
    method: req.method,
    headers: req.headers as Record<string, string>,
    ...(req.method === 'POST' ? { body: Buffer.concat(chunks) } : {}),
    signal: aborted.signal,
  });
  const response = await api.handle(request, certificatePem ? { certificatePem } : {});
  res.writeHead(response.status, Object.fromEntries(response.headers));
  res.end(Buffer.from(await response.arrayBuffer()));
}

beforeAll(async () => {
  scratch = await createScratchDatabase();
  security = pki({ key: new Uint8Array(randomBytes(32)) });
  const testModule = {
    id: 'httpagenttest',
    commandKinds: [{ name: 'test.run', payload: manifest({ ref: field.string().optional() }) }],
  };
  compute = await betterCompute({
    database: scratch.db,
    modules: [security.module, testModule],
    pki: security.port(),
    secrets: security.secrets(scratch.db),
  });
  await scratch.db.query("INSERT INTO sites (id, tenant_id, name, created_at) VALUES ('site_1', 'root', 's1', now())");
  api = createAgentApi({ compute, pki: security, longPollMaxMs: 10_000 });
  const tls = serverCertificate();
  serverCa = tls.cert;
  server = createServer({ ...tls, requestCert: true, rejectUnauthorized: false }, (req, res) => {
    serve(req, res).catch((error) => res.destroy(error));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  await api?.close();
  await compute?.close();
  await scratch?.drop();
});

async function joinToken(): Promise<string> {
  const { token } = await scratch.db.transaction((tx) =>
    security.issueJoinToken(tx, { tenantId: 'root', role: 'discovery', siteId: 'site_1', ttlSeconds: 600 }),
  );
  return token;
}

// The first test joins the agent the others call with: the tests run in file order even when vitest shuffles.
describe('createHttpAgent', { shuffle: false }, () => {
  let agent: HttpAgent;

  it('joins over HTTPS, opens a session, is woken by a command and completes it with a signed result', async () => {
    agent = createHttpAgent({ baseUrl, ca: serverCa });
    const joined = await agent.join(await joinToken(), { serial: 'SN-HTTP-1' });
    expect(joined.nodeId).toMatch(/^node_/);
    expect(agent.nodeId).toBe(joined.nodeId);
    const session = await agent.openSession('ramdisk', 'boot-http-1');
    expect(session).toMatchObject({ nodeId: joined.nodeId, role: 'ramdisk', bootId: 'boot-http-1' });

    const started = Date.now();
    const polling = agent.poll({ waitMs: 8_000 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const value = 'http-agent-secret-value';
    const ref = await security.secrets(scratch.db).put('root', value);
    const command = await scratch.db.transaction((tx) =>
      compute.commands.enqueue(tx, {
        nodeId: joined.nodeId,
        kind: 'test.run',
        payload: { ref },
        key: 'wf:wf_http:step#1',
        notAfter: new Date(Date.now() + 60_000),
      }),
    );
    const commands = await polling;
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(commands).toEqual([expect.objectContaining({ id: command.id, kind: 'test.run', payload: { ref } })]);

    await agent.ack(command.id);
    expect(await agent.fetchSecret(ref, command.id)).toBe(value);
    await agent.start(command.id);
    await agent.complete(command.id, { result: { wiped: true }, sign: true });
    const stored = await compute.commands.get(scratch.db, command.id);
    expect(stored?.state).toBe('succeeded');
    await expect(
      security.verifyAttestedResult(scratch.db, {
        nodeId: joined.nodeId,
        result: stored?.result ?? new Uint8Array(),
        attested: stored?.attested,
      }),
    ).resolves.toEqual({ certificateSerial: joined.serial });
  });

  it('reads its spec, reports the observed generation and its inventory, and renews its certificate', async () => {
    expect(await agent.getSpec()).toEqual({ spec: {}, generation: 1, observedGeneration: 0 });
    await agent.reportObservedGeneration(1);
    expect((await agent.getSpec()).observedGeneration).toBe(1);
    await agent.reportInventory({ cpu: { cores: 32 } });
    const before = agent.certificate?.serial;
    const renewed = await agent.renew({ rekey: true });
    expect(renewed.serial).not.toBe(before);
    expect(await agent.poll()).toEqual([]);
  });

  it("throws the server's error code as a ComputeError", async () => {
    const error = await agent.ack('cmd_01jq3z5v7x9b1d3f5h7k9m1p3r').catch((thrown: unknown) => thrown);
    expect(isComputeError(error, 'NOT_FOUND')).toBe(true);
    expect((error as { details: Record<string, unknown> }).details).toMatchObject({ status: 404 });
    const anonymous = createHttpAgent({ baseUrl, ca: serverCa });
    try {
      const refused = await anonymous.getSpec().catch((thrown: unknown) => thrown);
      expect(isComputeError(refused, 'UNAUTHENTICATED')).toBe(true);
    } finally {
      await anonymous.close();
    }
    await agent.close();
    expect(agent.session).toBeUndefined();
  });
});
