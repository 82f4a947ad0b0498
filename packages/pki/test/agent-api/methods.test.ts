import { X509Certificate } from 'node:crypto';
import { getNode } from '@better-compute/core/nodes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSigningKeyPair, signToBase64Url } from '../../src';
import { SESSION_TOUCH_EVERY_MS } from '../../src/agent-api';
import { type AgentHarness, createAgentHarness, type JoinedAgent, leaked } from './agent-harness';

let h: AgentHarness;
let agent: JoinedAgent;

beforeAll(async () => {
  h = await createAgentHarness();
  agent = await h.join();
});
afterAll(() => h.close());

const as = (method: string, body: unknown = {}) => h.call(method, body, agent.certificatePem);
// A test that reads the agent's command queue or open session joins an agent of its own: what other tests enqueued for
// `agent` or left open would otherwise be polled or touched along with its own, in whatever order the tests ran.
const asAgent =
  (joined: JoinedAgent) =>
  (method: string, body: unknown = {}) =>
    h.call(method, body, joined.certificatePem);

describe('the agent API', () => {
  it('joins with a token, a public key and claims, answering the node, its certificate and the CA', async () => {
    const { token } = await h.compute.database.transaction((tx) =>
      h.security.issueJoinToken(tx, { tenantId: 'acme', role: 'discovery', siteId: 'site_acme', ttlSeconds: 60 }),
    );
    h.plaintexts.push(token);
    const key = generateSigningKeyPair('es256');
    const { status, body } = await h.call('join', { token, publicKey: key.publicKeyPem, claims: { serial: 'x-1' } });
    expect(status).toBe(200);
    expect(body).toMatchObject({ tenantId: 'acme', siteId: 'site_acme', role: 'discovery' });
    expect(body.nodeId).toMatch(/^node_/);
    const certificate = new X509Certificate(body.certificatePem as string);
    expect(certificate.checkIssued(new X509Certificate(body.caCertificatePem as string))).toBe(true);
    expect(certificate.serialNumber.toLowerCase()).toBe(body.serial);
    expect(body.expiresAt).toBe(new Date(h.clock.now().getTime() + 3600_000).toISOString());
  });

  it('refuses a spent or unknown token with 401 and the reason, without echoing the token', async () => {
    const { status, body } = await h.call('join', {
      token: 'tok_01abc.not-a-real-secret',
      publicKey: generateSigningKeyPair().publicJwk,
    });
    expect(status).toBe(401);
    expect(body.code).toBe('UNAUTHENTICATED');
    expect(JSON.stringify(body)).not.toContain('not-a-real-secret');
  });

  it('opens and closes a session; the kernel sees it connected', async () => {
    const opened = await as('sessions.open', { role: 'ramdisk', bootId: 'boot-1' });
    expect(opened.status).toBe(200);
    expect(opened.body).toMatchObject({ nodeId: agent.nodeId, role: 'ramdisk', bootId: 'boot-1' });
    const { rows } = await h.compute.database.query<{ closed_at: Date | null }>(
      'SELECT closed_at FROM agent_sessions WHERE id = $1',
      [opened.body.sessionId],
    );
    expect(rows[0]?.closed_at).toBeNull();
    expect((await as('sessions.close')).body).toEqual({ closed: true });
    expect((await as('sessions.close')).body).toEqual({ closed: false });
  });

  it('touches the open session on a call, at most once every SESSION_TOUCH_EVERY_MS', async () => {
    const touching = await h.join();
    const call = asAgent(touching);
    const seen = async () =>
      (
        await h.compute.database.query<{ last_seen_at: Date }>(
          'SELECT last_seen_at FROM agent_sessions WHERE node_id = $1 AND closed_at IS NULL',
          [touching.nodeId],
        )
      ).rows[0]?.last_seen_at.getTime();
    expect((await call('sessions.open', { role: 'ramdisk', bootId: 'boot-touch' })).status).toBe(200);
    const before = await seen();
    expect(before).toBe(h.clock.now().getTime());
    h.clock.advance(SESSION_TOUCH_EVERY_MS - 1_000);
    await call('spec.get');
    expect(await seen()).toBe(before);
    h.clock.advance(1_000);
    await call('spec.get');
    expect(await seen()).toBe(h.clock.now().getTime());
  });

  it('polls, acks, starts and completes a command with an attested result', async () => {
    const agent = await h.join();
    const as = asAgent(agent);
    const commandId = await h.enqueue(agent.nodeId, { note: 'hello' });
    const polled = await as('commands.poll', { limit: 5 });
    expect(polled.status).toBe(200);
    expect(polled.body.commands).toEqual([
      expect.objectContaining({ id: commandId, kind: 'test.run', payload: { note: 'hello' }, key: expect.any(String) }),
    ]);
    expect((await as('commands.ack', { commandId })).body).toEqual({ commandId, state: 'acked' });
    expect((await as('commands.start', { commandId })).body).toEqual({ commandId, state: 'running' });
    const bytes = new TextEncoder().encode('{"ok":true}');
    const attested = {
      alg: 'es256',
      signature: signToBase64Url(agent.key.privateKeyPem, bytes),
      certificateSerial: agent.serial,
    };
    const completed = await as('commands.complete', {
      commandId,
      result: Buffer.from(bytes).toString('base64'),
      attested,
    });
    expect(completed.body).toEqual({ commandId, state: 'succeeded' });
    const stored = await h.compute.commands.get(h.compute.database, commandId);
    expect(Buffer.from(stored?.result ?? []).toString()).toBe('{"ok":true}');
    expect(stored?.attested).toEqual(attested);
    await expect(
      h.security.verifyAttestedResult(h.compute.database, { nodeId: agent.nodeId, result: bytes, attested }),
    ).resolves.toEqual({ certificateSerial: agent.serial });
  });

  it('fails and rejects commands with a reason', async () => {
    const agent = await h.join();
    const as = asAgent(agent);
    const failed = await h.enqueue(agent.nodeId);
    const rejected = await h.enqueue(agent.nodeId);
    await as('commands.poll');
    await as('commands.ack', { commandId: failed });
    await as('commands.start', { commandId: failed });
    expect((await as('commands.fail', { commandId: failed, reason: 'disk gone' })).body.state).toBe('failed');
    expect((await as('commands.reject', { commandId: rejected, reason: 'not now' })).body.state).toBe('rejected');
    expect((await h.compute.commands.get(h.compute.database, rejected))?.reason).toBe('not now');
  });

  it('moves a command against the state machine as 409 INVALID_STATE', async () => {
    const agent = await h.join();
    const as = asAgent(agent);
    const commandId = await h.enqueue(agent.nodeId);
    await as('commands.poll');
    const { status, body } = await as('commands.start', { commandId });
    expect(status).toBe(409);
    expect(body.code).toBe('INVALID_STATE');
  });

  it('fetches a secret its live command carries, for that command', async () => {
    const value = 'bmc-password-for-the-api';
    h.plaintexts.push(value);
    const ref = await h.security.secrets(h.compute.database).put('root', value);
    const commandId = await h.enqueue(agent.nodeId, { ref });
    expect((await as('secrets.fetch', { ref })).body).toEqual({ value });
    expect((await as('secrets.fetch', { commandId, ref })).body).toEqual({ value });
    const other = await h.enqueue(agent.nodeId, { note: 'carries nothing' });
    const refused = await as('secrets.fetch', { commandId: other, ref });
    expect(refused.status).toBe(404);
    expect(refused.body.details).toMatchObject({ path: ['ref'], reason: 'not-carried' });
  });

  it('refuses a secret for a command that is not the agent: unknown or another node, NOT_FOUND on commandId', async () => {
    const value = 'bmc-password-for-another-node';
    h.plaintexts.push(value);
    const ref = await h.security.secrets(h.compute.database).put('root', value);
    const neighbour = await h.join();
    const theirs = await h.enqueue(neighbour.nodeId, { ref });
    for (const commandId of [theirs, 'cmd_unknown']) {
      const refused = await as('secrets.fetch', { commandId, ref });
      expect(refused.status).toBe(404);
      expect(refused.body).toMatchObject({ code: 'NOT_FOUND', details: { path: ['commandId'] } });
      expect(JSON.stringify(refused.body)).not.toContain(value);
    }
    // The neighbour's own command still hands it over.
    const granted = await h.call('secrets.fetch', { commandId: theirs, ref }, neighbour.certificatePem);
    expect(granted.body).toEqual({ value });
  });

  it('stores a reported inventory under facts.reported with an event in the same transaction', async () => {
    const reported = await as('inventory.report', { inventory: { cpu: { cores: 64 }, gpus: ['H100', 'H100'] } });
    expect(reported.status).toBe(200);
    const node = await getNode(h.compute.database, agent.nodeId);
    expect(node?.facts.reported).toEqual({
      at: h.clock.now().toISOString(),
      inventory: { cpu: { cores: 64 }, gpus: ['H100', 'H100'] },
    });
    const { rows } = await h.compute.database.query<{ type: string; subject: string }>(
      "SELECT type, subject FROM events WHERE type = 'node.inventory-reported'",
    );
    expect(rows).toEqual([{ type: 'node.inventory-reported', subject: `node/${agent.nodeId}` }]);
  });

  it('reads the NodeSpec and records the observed generation, never past the generation', async () => {
    await h.compute.database.query(
      `UPDATE nodes SET spec = '{"host":{"hostname":"gpu-1"}}', generation = 3 WHERE id = $1`,
      [agent.nodeId],
    );
    expect((await as('spec.get')).body).toEqual({
      spec: { host: { hostname: 'gpu-1' } },
      generation: 3,
      observedGeneration: 0,
    });
    expect((await as('spec.report', { observedGeneration: 3 })).body).toEqual({
      generation: 3,
      observedGeneration: 3,
    });
    const ahead = await as('spec.report', { observedGeneration: 4 });
    expect(ahead.status).toBe(400);
    expect(ahead.body.details).toMatchObject({ path: ['observedGeneration'] });
    expect((await as('spec.get')).body.observedGeneration).toBe(3);
  });

  it('renews the certificate for the same node, re-keyed when asked', async () => {
    const key = generateSigningKeyPair('es256');
    const renewed = await as('certificates.renew', { publicKey: key.publicJwk });
    expect(renewed.status).toBe(200);
    expect(renewed.body).toMatchObject({ nodeId: agent.nodeId, tenantId: 'root', role: 'discovery' });
    expect(renewed.body.serial).not.toBe(agent.serial);
    const next = await h.call('spec.get', {}, renewed.body.certificatePem as string);
    expect(next.status).toBe(200);
  });

  it('logs no token, private key or secret value', async () => {
    // Made here, so the scan has lines and values to look at whatever ran before: a join (its token and private key),
    // a secret granted to the command that carries it, and the same secret refused to an agent that carries nothing.
    const joined = await h.join();
    const value = 'bmc-password-for-the-log-scan';
    h.plaintexts.push(value);
    const ref = await h.security.secrets(h.compute.database).put('root', value);
    const commandId = await h.enqueue(joined.nodeId, { ref });
    expect((await asAgent(joined)('secrets.fetch', { commandId, ref })).body).toEqual({ value });
    expect((await as('secrets.fetch', { ref })).status).toBe(404);
    expect(h.log.lines.filter((line) => line.includes(joined.nodeId) || line.includes(ref)).length).toBeGreaterThan(2);
    expect(leaked(h.log, h.plaintexts)).toEqual([]);
  });
});
