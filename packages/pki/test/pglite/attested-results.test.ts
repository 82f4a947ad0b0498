import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSigningKeyPair, type SigningKeyPair, signToBase64Url } from '../../src';
import { findInLogs, findPlaintext, insertNode, scratchPglite } from '../support/database';
import { computeErrorOf } from '../support/errors';
import { createHarness, type Harness, issueTracked } from '../support/harness';

let h: Harness;
let alpha: { nodeId: string; serial: string; key: SigningKeyPair };
let beta: { nodeId: string; serial: string; key: SigningKeyPair };
const result = new TextEncoder().encode('{"commandId":"cmd_1","wiped":["/dev/nvme0n1"]}');

async function enroll(id: string, alg: 'ed25519' | 'es256') {
  const nodeId = await insertNode(h.scratch.db, h.clock, { id });
  const { token } = await issueTracked(h, { tenantId: 'root', role: 'node', nodeId, ttlSeconds: 60 });
  const key = generateSigningKeyPair(alg);
  const joined = await h.scratch.db.transaction((tx) => h.pki.joinAgent(tx, { token, publicKey: key.publicKeyPem }));
  return { nodeId, serial: joined.serial, key };
}

beforeAll(async () => {
  h = await createHarness(await scratchPglite(), { certificateTtlSeconds: 600 });
  alpha = await enroll('node_alpha', 'ed25519');
  beta = await enroll('node_beta', 'es256');
});
afterAll(() => h.scratch.drop());

const attest = (signer: SigningKeyPair, serial: string, bytes = result) => ({
  alg: signer.alg,
  signature: signToBase64Url(signer.privateKeyPem, bytes),
  certificateSerial: serial,
});

const verify = (nodeId: string, attested: unknown, bytes = result) =>
  h.pki.verifyAttestedResult(h.scratch.db, { nodeId, result: bytes, attested });

describe('node-signed results', () => {
  it.each(['alpha', 'beta'])('verify against the node current certificate (%s)', async (name) => {
    const node = name === 'alpha' ? alpha : beta;
    await expect(verify(node.nodeId, attest(node.key, node.serial))).resolves.toEqual({
      certificateSerial: node.serial,
    });
  });

  it('fail on a tampered result', async () => {
    const tampered = new TextEncoder().encode('{"commandId":"cmd_1","wiped":[]}');
    const error = await computeErrorOf(verify(alpha.nodeId, attest(alpha.key, alpha.serial), tampered), 'DRIVER_ERROR');
    expect(error.details.reason).toBe('signature-invalid');
  });

  it("fail when signed under another node's certificate", async () => {
    const error = await computeErrorOf(verify(alpha.nodeId, attest(beta.key, beta.serial)), 'DRIVER_ERROR');
    expect(error.details.reason).toBe('certificate-other-node');
  });

  it("fail when another node's key signs under this node's certificate", async () => {
    const forged = { ...attest(generateSigningKeyPair('ed25519'), alpha.serial) };
    const error = await computeErrorOf(verify(alpha.nodeId, forged), 'DRIVER_ERROR');
    expect(error.details.reason).toBe('signature-invalid');
  });

  it('fail when the algorithm does not match the certificate key', async () => {
    const error = await computeErrorOf(
      verify(alpha.nodeId, { ...attest(alpha.key, alpha.serial), alg: 'es256' }),
      'DRIVER_ERROR',
    );
    expect(error.details.reason).toBe('algorithm-mismatch');
  });

  it('fail under an expired certificate', async () => {
    h.clock.advance(600_000);
    try {
      const error = await computeErrorOf(verify(alpha.nodeId, attest(alpha.key, alpha.serial)), 'DRIVER_ERROR');
      expect(error.details.reason).toBe('certificate-expired');
    } finally {
      h.clock.advance(-600_000);
    }
  });

  it.each([
    ['no attestation', null, ['attested']],
    ['an unknown alg', { alg: 'rsa', signature: 'AA', certificateSerial: 'ab' }, ['attested', 'alg']],
    ['a bad serial', { alg: 'ed25519', signature: 'AA', certificateSerial: 'zz' }, ['attested', 'certificateSerial']],
    ['a bad signature', { alg: 'ed25519', signature: '***', certificateSerial: 'ab' }, ['attested', 'signature']],
  ])('fail on %s as attestation-malformed with a path', async (_name, attested, path) => {
    const error = await computeErrorOf(verify(alpha.nodeId, attested), 'DRIVER_ERROR');
    expect(error.details).toMatchObject({ reason: 'attestation-malformed', path });
  });

  it('fail for a serial this CA never issued', async () => {
    const error = await computeErrorOf(verify(alpha.nodeId, attest(alpha.key, 'abcdef')), 'DRIVER_ERROR');
    expect(error.details.reason).toBe('certificate-unknown');
  });

  // Last: revocation is permanent for this file's node.
  it('fail once the key is revoked', async () => {
    await h.scratch.db.transaction((tx) => h.pki.revokeCertificate(tx, beta.serial, 'key-compromise'));
    const error = await computeErrorOf(verify(beta.nodeId, attest(beta.key, beta.serial)), 'DRIVER_ERROR');
    expect(error.details.reason).toBe('certificate-revoked');
  });
});

it('leaves no join token in plaintext in any table or log line', async () => {
  expect(h.plaintexts.length).toBeGreaterThan(0);
  expect(await findPlaintext(h.scratch.db, h.plaintexts)).toEqual([]);
  expect(findInLogs(h.log, h.plaintexts)).toEqual([]);
});
