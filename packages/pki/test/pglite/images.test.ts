import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSigningKeyPair, imageSigningBytes, signToBase64Url } from '../../src';
import { scratchPglite } from '../support/database';
import { computeErrorOf } from '../support/errors';
import { createHarness, type Harness } from '../support/harness';

let h: Harness;
const acmeKey = generateSigningKeyPair('ed25519');
const publicKey = generateSigningKeyPair('es256');
const rootKey = generateSigningKeyPair('ed25519');
const signers: Record<string, string> = {};
const digest = `sha256:${createHash('sha256').update('ubuntu-24.04.img').digest('hex')}`;

beforeAll(async () => {
  h = await createHarness(await scratchPglite());
  await h.scratch.db.transaction(async (tx) => {
    signers.acme = (
      await h.pki.addImageSigner(tx, { tenantId: 'acme', name: 'acme release', publicKey: acmeKey.publicJwk })
    ).id;
    signers.public = (
      await h.pki.addImageSigner(tx, { tenantId: null, name: 'vendor', publicKey: publicKey.publicKeyPem })
    ).id;
    signers.root = (
      await h.pki.addImageSigner(tx, { tenantId: 'root', name: 'root only', publicKey: rootKey.publicKeyPem })
    ).id;
  });
});
afterAll(() => h.scratch.drop());

const sign = (key: { privateKeyPem: string }, d = digest) => signToBase64Url(key.privateKeyPem, imageSigningBytes(d));

describe('image verification', () => {
  it("accepts an image signed by the tenant's own signer, and names it", async () => {
    expect(signers.acme).toMatch(/^sgn_/);
    await expect(
      h.pki.imageVerifier(h.scratch.db, { tenantId: 'acme', digest, signature: sign(acmeKey) }),
    ).resolves.toEqual({
      signerId: signers.acme,
    });
  });

  it('accepts a public signer for every tenant', async () => {
    for (const tenantId of ['acme', 'root']) {
      const verified = await h.pki.imageVerifier(h.scratch.db, { tenantId, digest, signature: sign(publicKey) });
      expect(verified.signerId).toBe(signers.public);
    }
  });

  it('refuses a tampered signature', async () => {
    const signature = Buffer.from(sign(acmeKey), 'base64url');
    signature[5] = (signature[5] ?? 0) ^ 0xff;
    const error = await computeErrorOf(
      h.pki.imageVerifier(h.scratch.db, { tenantId: 'acme', digest, signature: signature.toString('base64url') }),
      'PERMISSION_DENIED',
    );
    expect(error.details.reason).toBe('signature-invalid');
  });

  it('refuses a signature over another digest', async () => {
    const other = `sha256:${'0'.repeat(64)}`;
    await computeErrorOf(
      h.pki.imageVerifier(h.scratch.db, { tenantId: 'acme', digest, signature: sign(acmeKey, other) }),
      'PERMISSION_DENIED',
    );
  });

  it("refuses another tenant's signer as signer-unknown", async () => {
    const error = await computeErrorOf(
      h.pki.imageVerifier(h.scratch.db, { tenantId: 'acme', digest, signature: sign(rootKey), signerId: signers.root }),
      'PERMISSION_DENIED',
    );
    expect(error.details).toMatchObject({ reason: 'signer-unknown', path: ['signerId'] });
    await computeErrorOf(
      h.pki.imageVerifier(h.scratch.db, { tenantId: 'acme', digest, signature: sign(rootKey) }),
      'PERMISSION_DENIED',
    );
  });

  it('refuses a key that was never allowlisted', async () => {
    const stranger = generateSigningKeyPair('ed25519');
    await computeErrorOf(
      h.pki.imageVerifier(h.scratch.db, { tenantId: 'acme', digest, signature: sign(stranger) }),
      'PERMISSION_DENIED',
    );
  });

  it('refuses a signer named explicitly when its signature does not match', async () => {
    const error = await computeErrorOf(
      h.pki.imageVerifier(h.scratch.db, {
        tenantId: 'acme',
        digest,
        signature: sign(publicKey),
        signerId: signers.acme,
      }),
      'PERMISSION_DENIED',
    );
    expect(error.details.reason).toBe('signature-invalid');
  });

  it.each([
    [{ tenantId: 'acme', digest: 'md5:abc', signature: 'AA' }, ['digest']],
    [{ tenantId: 'acme', digest: `sha256:${'A'.repeat(64)}`, signature: 'AA' }, ['digest']],
    [{ tenantId: 'acme', digest, signature: '%%%' }, ['signature']],
    [{ tenantId: '', digest, signature: 'AA' }, ['tenantId']],
  ])('refuses malformed input %j with INVALID_INPUT at its path', async (input, path) => {
    const error = await computeErrorOf(h.pki.imageVerifier(h.scratch.db, input), 'INVALID_INPUT');
    expect(error.details.path).toEqual(path);
  });

  it('refuses a malformed signer key with INVALID_INPUT at publicKey', async () => {
    const error = await computeErrorOf(
      h.scratch.db.transaction((tx) => h.pki.addImageSigner(tx, { tenantId: 'acme', name: 'bad', publicKey: 'nope' })),
      'INVALID_INPUT',
    );
    expect(error.details.path).toEqual(['publicKey']);
  });

  it('stops accepting a revoked signer', async () => {
    await h.scratch.db.transaction((tx) => h.pki.revokeImageSigner(tx, signers.public as string));
    await computeErrorOf(
      h.pki.imageVerifier(h.scratch.db, { tenantId: 'acme', digest, signature: sign(publicKey) }),
      'PERMISSION_DENIED',
    );
  });
});
