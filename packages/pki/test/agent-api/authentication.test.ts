import { webcrypto } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { x509 } from '../../src/ca/x509';
import { type AgentHarness, createAgentHarness, type JoinedAgent, leaked } from './agent-harness';

let h: AgentHarness;
let agent: JoinedAgent;
let other: JoinedAgent;

beforeAll(async () => {
  h = await createAgentHarness();
  agent = await h.join();
  other = await h.join();
});
afterAll(() => h.close());

// A certificate for the agent's node, signed by a CA that has our CA's name but not its key.
async function impostorCertificate(): Promise<string> {
  const caPem = await h.security.caCertificate(h.compute.database);
  const caName = new x509.X509Certificate(caPem as string).subject;
  const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
  const keys = (await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const certificate = await x509.X509CertificateGenerator.create({
    serialNumber: agent.serial,
    subject: `CN=${agent.nodeId}, O=root, OU=discovery`,
    issuer: caName,
    notBefore: new Date(h.clock.now().getTime() - 60_000),
    notAfter: new Date(h.clock.now().getTime() + 3600_000),
    signingAlgorithm: alg,
    publicKey: keys.publicKey,
    signingKey: keys.privateKey,
  });
  return certificate.toString('pem');
}

describe('agent API authentication', () => {
  it('answers every method but join 401 UNAUTHENTICATED without a client certificate', async () => {
    for (const method of ['sessions.open', 'commands.poll', 'commands.ack', 'secrets.fetch', 'spec.get']) {
      const { status, body } = await h.call(method, {});
      expect(status, method).toBe(401);
      expect(body).toMatchObject({ code: 'UNAUTHENTICATED', details: { reason: 'certificate-missing' } });
    }
  });

  it("refuses another CA's certificate and text that is not a certificate", async () => {
    const forged = await h.call('spec.get', {}, await impostorCertificate());
    expect(forged.status).toBe(401);
    expect(forged.body.details).toMatchObject({ reason: 'certificate-untrusted' });
    const garbage = await h.call('spec.get', {}, 'not a certificate');
    expect(garbage.status).toBe(401);
    expect(garbage.body.details).toMatchObject({ reason: 'certificate-malformed' });
  });

  it('refuses a revoked certificate', async () => {
    const revoked = await h.join();
    expect((await h.call('spec.get', {}, revoked.certificatePem)).status).toBe(200);
    await h.security.revokeCertificate(h.compute.database, revoked.serial, 'key-compromise');
    const { status, body } = await h.call('spec.get', {}, revoked.certificatePem);
    expect(status).toBe(401);
    expect(body.details).toMatchObject({ reason: 'certificate-revoked' });
  });

  it('refuses an expired certificate, and renewal with it', async () => {
    const start = h.clock.now();
    try {
      h.clock.advance(3600_000 + 1);
      for (const method of ['spec.get', 'certificates.renew']) {
        const { status, body } = await h.call(method, {}, agent.certificatePem);
        expect(status, method).toBe(401);
        expect(body.details).toMatchObject({ reason: 'certificate-expired' });
      }
    } finally {
      h.clock.set(start);
    }
  });

  it("answers another node's command id NOT_FOUND and changes nothing", async () => {
    const commandId = await h.enqueue(other.nodeId);
    for (const [method, body] of [
      ['commands.ack', { commandId }],
      ['commands.start', { commandId }],
      ['commands.complete', { commandId, result: 'AAEC' }],
      ['commands.fail', { commandId, reason: 'mine now' }],
      ['commands.reject', { commandId, reason: 'mine now' }],
      ['secrets.fetch', { commandId, ref: 'sec_01jq3z5v7x9b1d3f5h7k9m1p3r' }],
    ] as const) {
      const answer = await h.call(method, body, agent.certificatePem);
      expect(answer.status, method).toBe(404);
      expect(answer.body.code).toBe('NOT_FOUND');
    }
    expect((await h.call('commands.poll', {}, agent.certificatePem)).body.commands).toEqual([]);
    const stored = await h.compute.commands.get(h.compute.database, commandId);
    expect(stored?.state).toBe('pending');
    expect(stored?.updatedAt.getTime()).toBe(stored?.createdAt.getTime());
  });

  it("refuses another tenant's secret even when the agent's command carries its reference", async () => {
    const value = 'acme-only-secret-value';
    h.plaintexts.push(value);
    const ref = await h.security.secrets(h.compute.database).put('acme', value);
    const commandId = await h.enqueue(agent.nodeId, { ref });
    const { status, body } = await h.call('secrets.fetch', { commandId, ref }, agent.certificatePem);
    expect(status).toBe(404);
    expect(body.details).toMatchObject({ reason: 'not-carried' });
    expect(JSON.stringify(body)).not.toContain(value);
  });

  it('refuses a secret whose command is no longer live', async () => {
    const value = 'one-shot-install-secret';
    h.plaintexts.push(value);
    const ref = await h.security.secrets(h.compute.database).put('root', value);
    const commandId = await h.enqueue(agent.nodeId, { ref });
    const as = (method: string, body: unknown) => h.call(method, body, agent.certificatePem);
    expect((await as('secrets.fetch', { commandId, ref })).body).toEqual({ value });
    await as('commands.poll', {});
    await as('commands.ack', { commandId });
    await as('commands.start', { commandId });
    await as('commands.complete', { commandId });
    for (const body of [{ ref }, { commandId, ref }]) {
      const refused = await as('secrets.fetch', body);
      expect(refused.status).toBe(404);
      expect(JSON.stringify(refused.body)).not.toContain(value);
    }
  });

  it('takes the identity from the certificate only: a nodeId in the body is refused', async () => {
    const { status, body } = await h.call('spec.get', { nodeId: other.nodeId }, agent.certificatePem);
    expect(status).toBe(400);
    expect(body.details).toMatchObject({ path: ['nodeId'] });
  });

  it('logs no token, private key or secret value', () => {
    expect(leaked(h.log, h.plaintexts)).toEqual([]);
  });
});
