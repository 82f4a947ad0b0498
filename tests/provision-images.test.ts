import { createHash, randomBytes } from 'node:crypto';
import { ComputeError, isComputeError } from 'better-compute/core';
import {
  addImageSigner,
  generateSigningKeyPair,
  type ImageVerifier,
  imageSigningBytes,
  pki,
  revokeImageSigner,
  signToBase64Url,
} from 'better-compute/pki';
import { type RegisterImageInput, registerImage, resolveImageRef } from 'better-compute/provision';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BACKENDS, type ScratchDatabase } from './support/databases';
import { createEngineLab, type EngineLab } from './support/engine-lab';
import { rejectionOf } from './support/errors';

// The image catalog (steps-and-profiles.md "Images"): images registered by digest and verified against allowlisted
// signers, resolved by name@version preferring the tenant's own, and provisionModule({ imageVerifier }).

function computeError(error: unknown, code: ComputeError['code']): ComputeError {
  expect(isComputeError(error), String(error)).toBe(true);
  expect((error as ComputeError).code).toBe(code);
  return error as ComputeError;
}

const digestOf = (text: string) => `sha256:${createHash('sha256').update(text).digest('hex')}`;
const noble = digestOf('ubuntu-24.04.1-server-cloudimg-amd64.img');
const rootNoble = digestOf('root build of ubuntu 24.04.1');
const acmeKey = generateSigningKeyPair('ed25519');
const rootKey = generateSigningKeyPair('ed25519');
const sign = (key: { privateKeyPem: string }, digest: string) =>
  signToBase64Url(key.privateKeyPem, imageSigningBytes(digest));

/** A verifier backed by something else than the allowlist (a KMS, sigstore, …): here, `kms:<digest>`. */
const kmsVerifier: ImageVerifier = async (_sql, input) => {
  if (input.signature !== `kms:${input.digest}`) {
    throw new ComputeError('PERMISSION_DENIED', 'the KMS did not sign this digest', {
      details: { path: ['signature'], reason: 'kms-refused' },
    });
  }
  return { signerId: 'kms:release-2026' };
};

describe.each(BACKENDS)('the image catalog on $name', ({ create }) => {
  let scratch: ScratchDatabase;
  let lab: EngineLab;
  let kmsLab: EngineLab;
  const signers: Record<string, string> = {};

  beforeAll(async () => {
    scratch = await create();
    const security = pki({ key: randomBytes(32).toString('hex') });
    lab = await createEngineLab(scratch.db, { modules: [security.module] });
    kmsLab = await createEngineLab(scratch.db, { clock: lab.clock, provision: { imageVerifier: kmsVerifier } });
    await lab.db.query(
      `INSERT INTO tenants (id, name, created_at) VALUES ('acme', 'Acme', $1), ('globex', 'Globex', $1)
       ON CONFLICT (id) DO NOTHING`,
      [lab.clock.now()],
    );
    await lab.db.transaction(async (tx) => {
      const clock = { clock: lab.clock };
      signers.acme = (
        await addImageSigner(tx, { tenantId: 'acme', name: 'acme release', publicKey: acmeKey.publicJwk }, clock)
      ).id;
      signers.root = (
        await addImageSigner(tx, { tenantId: 'root', name: 'root release', publicKey: rootKey.publicKeyPem }, clock)
      ).id;
    });
  });
  afterAll(async () => {
    await kmsLab?.close();
    await lab?.close();
    await scratch?.drop();
  });
  beforeEach(async () => {
    await lab.reset();
  });

  const acmeNoble = (): RegisterImageInput => ({
    tenantId: 'acme',
    name: 'ubuntu/noble',
    version: '24.04.1',
    digest: noble,
    signature: sign(acmeKey, noble),
    url: 'https://images.acme.example/ubuntu/noble-24.04.1.img',
  });
  const register = (input: RegisterImageInput) => lab.db.transaction((tx) => lab.provision.images.register(tx, input));

  it("registers an image signed by the tenant's Ed25519 signer, naming the signer", async () => {
    const image = await register(acmeNoble());
    expect(image).toMatchObject({
      tenantId: 'acme',
      name: 'ubuntu/noble',
      version: '24.04.1',
      ref: 'ubuntu/noble@24.04.1',
      digest: noble,
      url: 'https://images.acme.example/ubuntu/noble-24.04.1.img',
      public: false,
      signerId: signers.acme,
    });
    expect(image.id).toMatch(/^img_/);
    expect(image.createdAt).toEqual(lab.clock.now());
    expect(await lab.db.transaction((tx) => resolveImageRef(tx, 'acme', 'ubuntu/noble@24.04.1'))).toEqual(image);
  });

  it("refuses a bad signature with the verifier's error, and registers nothing", async () => {
    const tampered = Buffer.from(sign(acmeKey, noble), 'base64url');
    tampered[3] = (tampered[3] ?? 0) ^ 0xff;
    const cases = [
      { ...acmeNoble(), signature: tampered.toString('base64url') },
      { ...acmeNoble(), signature: sign(acmeKey, digestOf('something else')) },
      // root's signer is not allowlisted for acme.
      { ...acmeNoble(), signature: sign(rootKey, noble) },
    ];
    for (const input of cases) {
      const error = computeError(await rejectionOf(() => register(input)), 'PERMISSION_DENIED');
      expect(['signature-invalid', 'signer-unknown']).toContain(error.details.reason);
    }
    const { rows } = await lab.db.query('SELECT id FROM images');
    expect(rows).toEqual([]);
  });

  it.each([
    [{ digest: 'md5:abc' }, ['digest']],
    [{ name: 'Ubuntu Noble' }, ['name']],
    [{ version: '24.04 LTS' }, ['version']],
    [{ url: 'https://user:hunter2@images.acme.example/noble.img' }, ['url']],
    [{ url: 'not a url' }, ['url']],
    [{ public: 'yes' }, ['public']],
    [{ checksum: noble }, ['checksum']],
    [{ url: 'https://images.acme.example/noble\u0000.img' }, ['url']],
    [{ tenantId: 'ac\u0000me' }, ['tenantId']],
    [{ signerId: 'isg_\ud800' }, ['signerId']],
  ])('refuses malformed input %j with INVALID_INPUT at its path', async (change, path) => {
    const error = computeError(
      await rejectionOf(() => register({ ...acmeNoble(), ...change } as RegisterImageInput)),
      'INVALID_INPUT',
    );
    expect(error.details.path).toEqual(path);
  });

  it('is CONFLICT when the tenant already has that name@version, but another tenant may', async () => {
    await register(acmeNoble());
    const error = computeError(await rejectionOf(() => register(acmeNoble())), 'CONFLICT');
    expect(error.details.path).toEqual(['version']);
    const root = await register({
      ...acmeNoble(),
      tenantId: 'root',
      digest: rootNoble,
      signature: sign(rootKey, rootNoble),
    });
    expect(root.tenantId).toBe('root');
  });

  it("resolves the tenant's own image before a public one, and a public one for everyone else", async () => {
    const publicNoble = await register({
      ...acmeNoble(),
      tenantId: 'root',
      digest: rootNoble,
      signature: sign(rootKey, rootNoble),
      url: 'https://images.example/ubuntu/noble-24.04.1.img',
      public: true,
    });
    const own = await register(acmeNoble());
    const resolveFor = (tenantId: string, ref = 'ubuntu/noble@24.04.1') =>
      lab.db.transaction((tx) => resolveImageRef(tx, tenantId, ref));
    expect(await resolveFor('acme')).toEqual(own);
    expect(await resolveFor('globex')).toEqual(publicNoble);
    expect(await resolveFor('root')).toEqual(publicNoble);
    // Acme's own image is not public: another tenant never sees it.
    await register({ ...acmeNoble(), version: '24.04.2' });
    computeError(await rejectionOf(() => resolveFor('globex', 'ubuntu/noble@24.04.2')), 'NOT_FOUND');
    expect((await resolveFor('acme', 'ubuntu/noble@24.04.2')).tenantId).toBe('acme');
  });

  it('is NOT_FOUND for an unknown image and INVALID_INPUT for a malformed reference', async () => {
    const missing = computeError(
      await rejectionOf(() => resolveImageRef(lab.db, 'acme', 'ubuntu/noble@26.04')),
      'NOT_FOUND',
    );
    expect(missing.details.path).toEqual(['ref']);
    for (const ref of ['ubuntu/noble', '@24.04', 'ubuntu noble@24.04', 'a@b@c']) {
      const error = computeError(await rejectionOf(() => resolveImageRef(lab.db, 'acme', ref)), 'INVALID_INPUT');
      expect(error.details.path).toEqual(['ref']);
    }
  });

  it("registerImage defaults to pki's allowlist", async () => {
    const image = await lab.db.transaction((tx) => registerImage(tx, acmeNoble(), undefined, { clock: lab.clock }));
    expect(image.signerId).toBe(signers.acme);
  });

  it('stops resolving through provision.images once the signer is revoked', async () => {
    const signer = generateSigningKeyPair('ed25519');
    const signerId = (
      await lab.db.transaction((tx) =>
        addImageSigner(
          tx,
          { tenantId: 'acme', name: 'short-lived', publicKey: signer.publicJwk },
          { clock: lab.clock },
        ),
      )
    ).id;
    const digest = digestOf('talos 1.9.2');
    await register({
      tenantId: 'acme',
      name: 'talos',
      version: 'v1.9.2',
      digest,
      signature: sign(signer, digest),
      signerId,
    });
    expect((await lab.provision.images.resolve(lab.db, 'acme', 'talos@v1.9.2')).signerId).toBe(signerId);
    await lab.db.transaction((tx) => revokeImageSigner(tx, signerId, { clock: lab.clock }));
    const error = computeError(
      await rejectionOf(() => lab.provision.images.resolve(lab.db, 'acme', 'talos@v1.9.2')),
      'PERMISSION_DENIED',
    );
    expect(error.details.reason).toBe('signer-unknown');
  });

  it('checks signatures with provisionModule({ imageVerifier }) instead of the allowlist', async () => {
    const input = { ...acmeNoble(), signature: `kms:${noble}` };
    const image = await lab.db.transaction((tx) => kmsLab.provision.images.register(tx, input));
    expect(image).toMatchObject({ signerId: 'kms:release-2026', signature: `kms:${noble}` });
    expect((await kmsLab.provision.images.resolve(lab.db, 'acme', 'ubuntu/noble@24.04.1')).id).toBe(image.id);
    // The custom verifier's refusal is what the caller gets, even for a signature the allowlist would accept.
    const refused = computeError(
      await rejectionOf(() =>
        lab.db.transaction((tx) => kmsLab.provision.images.register(tx, { ...acmeNoble(), version: '24.04.2' })),
      ),
      'PERMISSION_DENIED',
    );
    expect(refused.details.reason).toBe('kms-refused');
    // And the allowlist, in the other module, refuses the KMS signature.
    await rejectionOf(() => register({ ...input, version: '24.04.3' }));
  });
});
