import { randomBytes } from 'node:crypto';
import { betterCompute, type Compute, field, manifest } from '@better-compute/core';
import { createPgliteDatabase } from '@better-compute/core/pglite';
import { generateSigningKeyPair, type Pki, pki, type SigningKeyPair } from '../../src';
import { type AgentApi, type AgentApiOptions, createAgentApi } from '../../src/agent-api';
import { type FakeClock, fakeClock, type RecordingLogger, recordingLogger } from '../support/database';

/** One test file's kernel on PGlite with pki and a `test.run` command kind, and an agent API over it. */
export interface AgentHarness {
  compute: Compute;
  security: Pki;
  clock: FakeClock;
  log: RecordingLogger;
  api: AgentApi;
  /** Every token, key and secret value the file made: none may appear in a log line. */
  plaintexts: string[];
  /** Calls a method of `api` (or another API) as the holder of `certificatePem`. */
  call(
    method: string,
    body?: unknown,
    certificatePem?: string,
    init?: RequestInit & { api?: AgentApi },
  ): Promise<{ status: number; body: Record<string, unknown> & { code?: string; details?: Record<string, unknown> } }>;
  /** Joins a new discovery agent of `tenantId` through the API. */
  join(tenantId?: string): Promise<JoinedAgent>;
  /** Enqueues a `test.run` command for a node (key `wf:<unique>:step#1` so a secret it carries can be fetched). */
  enqueue(nodeId: string, payload?: { ref?: string; note?: string }): Promise<string>;
  close(): Promise<void>;
}

/** An agent joined through the API. */
export interface JoinedAgent {
  nodeId: string;
  tenantId: string;
  serial: string;
  certificatePem: string;
  key: SigningKeyPair;
}

let sequence = 0;

/** Builds an {@link AgentHarness}. */
export async function createAgentHarness(options: Partial<AgentApiOptions> = {}): Promise<AgentHarness> {
  const clock = fakeClock();
  const log = recordingLogger();
  const database = await createPgliteDatabase();
  const security = pki({ key: new Uint8Array(randomBytes(32)), clock, log, certificateTtlSeconds: 3600 });
  const testModule = {
    id: 'agenttest',
    commandKinds: [
      { name: 'test.run', payload: manifest({ ref: field.string().optional(), note: field.string().optional() }) },
    ],
  };
  const compute = await betterCompute({
    database,
    modules: [security.module, testModule],
    pki: security.port(),
    secrets: security.secrets(database),
    clock,
    logger: log,
  });
  const now = clock.now();
  await database.query("INSERT INTO tenants (id, name, created_at) VALUES ('acme', 'acme', $1)", [now]);
  await database.query(
    "INSERT INTO sites (id, tenant_id, name, created_at) VALUES ('site_root', 'root', 'r1', $1), ('site_acme', 'acme', 'a1', $1)",
    [now],
  );
  const api = createAgentApi({ compute, pki: security, ...options });
  const plaintexts: string[] = [];

  const call: AgentHarness['call'] = async (method, body = {}, certificatePem, init = {}) => {
    const { api: target = api, ...rest } = init;
    const request = new Request(`https://control-plane.test/agent/v1/${method}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: typeof body === 'string' ? body : JSON.stringify(body),
      ...rest,
    });
    const response = await target.handle(request, certificatePem === undefined ? {} : { certificatePem });
    return { status: response.status, body: (await response.json()) as never };
  };

  return {
    compute,
    security,
    clock,
    log,
    api,
    plaintexts,
    call,
    async join(tenantId = 'root') {
      const siteId = tenantId === 'root' ? 'site_root' : 'site_acme';
      const { token } = await database.transaction((tx) =>
        security.issueJoinToken(tx, { tenantId, role: 'discovery', siteId, ttlSeconds: 600 }),
      );
      const key = generateSigningKeyPair('es256');
      plaintexts.push(token, key.privateKeyPem);
      const joined = await call('join', { token, publicKey: key.publicJwk, claims: { serial: `sn-${++sequence}` } });
      if (joined.status !== 200) throw new Error(`join failed: ${JSON.stringify(joined.body)}`);
      const answer = joined.body as unknown as JoinedAgent;
      return { nodeId: answer.nodeId, tenantId, serial: answer.serial, certificatePem: answer.certificatePem, key };
    },
    async enqueue(nodeId, payload = {}) {
      sequence += 1;
      const command = await database.transaction((tx) =>
        compute.commands.enqueue(tx, {
          nodeId,
          kind: 'test.run',
          payload,
          key: `wf:wf_${sequence}:step#1`,
          notAfter: new Date(clock.now().getTime() + 600_000),
        }),
      );
      return command.id;
    },
    async close() {
      await api.close();
      await compute.close();
      await database.close();
    },
  };
}

/** Every line of `log` that contains one of `plaintexts`. */
export function leaked(log: RecordingLogger, plaintexts: readonly string[]): string[] {
  return log.lines.filter((line) =>
    plaintexts.some((text) => line.includes(text) || line.includes(JSON.stringify(text).slice(1, -1))),
  );
}
