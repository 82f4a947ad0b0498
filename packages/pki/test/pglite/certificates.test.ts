import { execFileSync } from 'node:child_process';
import { X509Certificate as NodeCertificate } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join as joinPath } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentUri, generateSigningKeyPair, pki } from '../../src';
import { findInLogs, findPlaintext, scratchPglite } from '../support/database';
import { computeErrorOf } from '../support/errors';
import { createHarness, type Harness, issueTracked } from '../support/harness';

let h: Harness;

beforeAll(async () => {
  h = await createHarness(await scratchPglite(), { certificateTtlSeconds: 3600 });
});
afterAll(() => h.scratch.drop());

async function joinNew(alg: 'ed25519' | 'es256' = 'ed25519') {
  const { token } = await issueTracked(h, {
    tenantId: 'acme',
    role: 'discovery',
    siteId: 'site_acme',
    ttlSeconds: 600,
  });
  const key = generateSigningKeyPair(alg);
  const joined = await h.scratch.db.transaction((tx) => h.pki.joinAgent(tx, { token, publicKey: key.publicJwk }));
  return { joined, key };
}

describe('agent certificates', () => {
  it.each(['ed25519', 'es256'] as const)(
    'carry node, tenant, site and role for an %s key and chain to the CA',
    async (alg) => {
      const { joined, key } = await joinNew(alg);
      const cert = new NodeCertificate(joined.certificatePem);
      const ca = new NodeCertificate(joined.caCertificatePem);
      expect(cert.subject).toContain(`CN=${joined.nodeId}`);
      expect(cert.subject).toContain('O=acme');
      expect(cert.subject).toContain('OU=discovery');
      expect(cert.subjectAltName).toBe(
        `URI:${agentUri({ tenantId: 'acme', siteId: 'site_acme', nodeId: joined.nodeId, role: 'discovery' })}`,
      );
      expect(cert.subjectAltName).toContain(
        `spiffe://better-compute/tenant/acme/site/site_acme/node/${joined.nodeId}/role/discovery`,
      );
      expect(cert.checkIssued(ca)).toBe(true);
      expect(cert.verify(ca.publicKey)).toBe(true);
      expect(cert.ca).toBe(false);
      expect(ca.ca).toBe(true);
      expect(cert.keyUsage).toEqual(expect.arrayContaining(['1.3.6.1.5.5.7.3.2']));
      expect(cert.publicKey.export({ format: 'jwk' })).toMatchObject({ x: key.publicJwk.x });
      expect(new Date(cert.validTo).getTime()).toBe(Math.floor(joined.expiresAt.getTime() / 1000) * 1000);
      expect(joined.expiresAt.getTime() - h.clock.now().getTime()).toBe(3600_000);
    },
  );

  it('pass OpenSSL verification for TLS client use', async () => {
    const { joined } = await joinNew('es256');
    const folder = mkdtempSync(joinPath(tmpdir(), 'pki-cert-'));
    writeFileSync(joinPath(folder, 'ca.pem'), joined.caCertificatePem);
    writeFileSync(joinPath(folder, 'agent.pem'), joined.certificatePem);
    // attime: OpenSSL must judge validity at the fake clock's time, as the control plane does.
    const at = String(Math.floor(h.clock.now().getTime() / 1000));
    const out = execFileSync('openssl', [
      'verify',
      '-attime',
      at,
      '-purpose',
      'sslclient',
      '-CAfile',
      joinPath(folder, 'ca.pem'),
      joinPath(folder, 'agent.pem'),
    ]);
    expect(out.toString()).toContain('OK');
  });

  it('verify under the clock and name the node', async () => {
    const { joined } = await joinNew();
    const verified = await h.pki.verifyAgentCertificate(h.scratch.db, joined.certificatePem);
    expect(verified).toMatchObject({
      nodeId: joined.nodeId,
      tenantId: 'acme',
      siteId: 'site_acme',
      role: 'discovery',
      serial: joined.serial,
    });
  });

  it('are refused once expired under the clock', async () => {
    const { joined } = await joinNew();
    h.clock.advance(3600_000);
    try {
      const error = await computeErrorOf(
        h.pki.verifyAgentCertificate(h.scratch.db, joined.certificatePem),
        'UNAUTHENTICATED',
      );
      expect(error.details.reason).toBe('certificate-expired');
    } finally {
      h.clock.advance(-3600_000);
    }
  });

  it('are refused everywhere once revoked', async () => {
    const { joined } = await joinNew();
    await h.scratch.db.transaction((tx) => h.pki.revokeCertificate(tx, joined.serial, 'key-compromise'));
    const error = await computeErrorOf(
      h.pki.verifyAgentCertificate(h.scratch.db, joined.certificatePem),
      'UNAUTHENTICATED',
    );
    expect(error.details.reason).toBe('certificate-revoked');
  });

  it('renew to a new certificate for the same identity, and re-key with a new public key', async () => {
    const { joined } = await joinNew();
    h.clock.advance(1800_000);
    const newKey = generateSigningKeyPair('es256');
    const renewed = await h.scratch.db.transaction((tx) =>
      h.pki.renewAgentCertificate(tx, { certificatePem: joined.certificatePem, publicKey: newKey.publicKeyPem }),
    );
    expect(renewed.serial).not.toBe(joined.serial);
    expect(renewed.expiresAt.getTime()).toBeGreaterThan(joined.expiresAt.getTime());
    expect((await h.pki.verifyAgentCertificate(h.scratch.db, renewed.certificatePem)).nodeId).toBe(joined.nodeId);
    expect(new NodeCertificate(renewed.certificatePem).publicKey.export({ format: 'jwk' })).toMatchObject({
      x: newKey.publicJwk.x,
    });
    h.clock.advance(-1800_000);
  });

  it('refuse to renew a revoked certificate', async () => {
    const { joined } = await joinNew();
    await h.scratch.db.transaction((tx) => h.pki.revokeNodeCertificates(tx, joined.nodeId, 'retired'));
    await computeErrorOf(
      h.scratch.db.transaction((tx) => h.pki.renewAgentCertificate(tx, { certificatePem: joined.certificatePem })),
      'UNAUTHENTICATED',
    );
  });

  it('from another CA are untrusted', async () => {
    const other = await createHarness(await scratchPglite());
    try {
      const { token } = await issueTracked(other, {
        tenantId: 'acme',
        role: 'discovery',
        siteId: 'site_acme',
        ttlSeconds: 60,
      });
      const foreign = await other.scratch.db.transaction((tx) =>
        other.pki.joinAgent(tx, { token, publicKey: generateSigningKeyPair().publicJwk }),
      );
      const error = await computeErrorOf(
        h.pki.verifyAgentCertificate(h.scratch.db, foreign.certificatePem),
        'UNAUTHENTICATED',
      );
      expect(error.details.reason).toBe('certificate-untrusted');
    } finally {
      await other.scratch.drop();
    }
  });

  it.each([
    ['text', 'hello'],
    ['a broken PEM', '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n'],
    ['a number', 7],
  ])('refuse %s as INVALID_INPUT at certificate', async (_name, pem) => {
    const error = await computeErrorOf(h.pki.verifyAgentCertificate(h.scratch.db, pem), 'INVALID_INPUT');
    expect(error.details.path).toEqual(['certificate']);
  });
});

describe('the CA', () => {
  it('keeps its key sealed with AES-256-GCM at rest, and another key cannot use it', async () => {
    // The CA is made on the first certificate it signs: a join here makes sure there is one, whatever ran before.
    await joinNew();
    const { rows } = await h.scratch.db.query<{ sealed_key: string; certificate_pem: string }>('SELECT * FROM pki_ca');
    expect(rows).toHaveLength(1);
    expect(rows[0]?.sealed_key).toMatch(/^v1\./);
    expect(rows[0]?.sealed_key).not.toContain('PRIVATE KEY');
    const wrongKey = pki({ key: new Uint8Array(32).fill(7), clock: h.clock });
    const { token } = await issueTracked(h, {
      tenantId: 'acme',
      role: 'discovery',
      siteId: 'site_acme',
      ttlSeconds: 60,
    });
    const error = await computeErrorOf(
      h.scratch.db.transaction((tx) =>
        wrongKey.joinAgent(tx, { token, publicKey: generateSigningKeyPair().publicJwk }),
      ),
      'INTERNAL',
    );
    expect(error.details.reason).toBe('decrypt-failed');
  });

  it('is created with Ed25519 when configured', async () => {
    const other = await createHarness(await scratchPglite(), { caAlgorithm: 'ed25519' });
    try {
      const { token } = await issueTracked(other, {
        tenantId: 'root',
        role: 'discovery',
        siteId: 'site_root',
        ttlSeconds: 60,
      });
      const joined = await other.scratch.db.transaction((tx) =>
        other.pki.joinAgent(tx, { token, publicKey: generateSigningKeyPair('es256').publicJwk }),
      );
      const ca = new NodeCertificate(joined.caCertificatePem);
      expect(ca.publicKey.asymmetricKeyType).toBe('ed25519');
      expect(new NodeCertificate(joined.certificatePem).verify(ca.publicKey)).toBe(true);
    } finally {
      await other.scratch.drop();
    }
  });
});

it('leaves no join token in plaintext in any table or log line', async () => {
  // Tokens of its own, so the scan looks for real values whatever ran before: spent by joins with either key type (one
  // certificate then renewed), one refused when presented again by another key, and one never spent.
  const { joined } = await joinNew('ed25519');
  await joinNew('es256');
  await h.scratch.db.transaction((tx) => h.pki.renewAgentCertificate(tx, { certificatePem: joined.certificatePem }));
  const refused = await issueTracked(h, {
    tenantId: 'acme',
    role: 'discovery',
    siteId: 'site_acme',
    ttlSeconds: 600,
    maxUses: 1,
  });
  const once = { token: refused.token, publicKey: generateSigningKeyPair().publicJwk };
  await h.scratch.db.transaction((tx) => h.pki.joinAgent(tx, once));
  await computeErrorOf(
    h.scratch.db.transaction((tx) => h.pki.joinAgent(tx, { ...once, publicKey: generateSigningKeyPair().publicJwk })),
    'UNAUTHENTICATED',
  );
  await issueTracked(h, { tenantId: 'root', role: 'discovery', siteId: 'site_root', ttlSeconds: 60 });
  expect(h.plaintexts.length).toBeGreaterThanOrEqual(8);
  expect(h.log.lines.some((line) => line.includes(refused.id))).toBe(true);
  expect(await findPlaintext(h.scratch.db, h.plaintexts)).toEqual([]);
  expect(findInLogs(h.log, h.plaintexts)).toEqual([]);
});
