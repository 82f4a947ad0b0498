import { randomBytes } from 'node:crypto';
import {
  type ApiClient,
  betterCompute,
  type Clock,
  type Compute,
  ComputeError,
  createCredential,
  type Json,
} from '@better-compute/core';
import { createOpenApiDocument } from '@better-compute/core/kernel';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  generateSigningKeyPair,
  type ImageSignersApi,
  imageSigningBytes,
  imageVerifier,
  pki,
  signToBase64Url,
} from '../src';

// The pki module's `imageSigners` group: the allowlist image registration verifies against, managed over the API.

let now = new Date('2026-03-01T00:00:00Z').getTime();
const clock: Clock = { now: () => new Date(now) };
const rootKey = generateSigningKeyPair('ed25519');
const acmeKey = generateSigningKeyPair('es256');
const digest = `sha256:${'ab'.repeat(32)}`;
let compute: Compute;
let api: ApiClient<{ imageSigners: ImageSignersApi }>;
let root: string;
let acme: string;

async function refusal(promise: Promise<unknown>): Promise<ComputeError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ComputeError);
  return error as ComputeError;
}

beforeAll(async () => {
  compute = await betterCompute({ clock, modules: [pki({ key: randomBytes(32).toString('hex') }).module] });
  api = compute.api as unknown as typeof api;
  await compute.database.query(
    `INSERT INTO tenants (id, name, created_at) VALUES ('acme', 'Acme', $1), ('globex', 'Globex', $1)`,
    [clock.now()],
  );
  const make = (tenantId: string, permissions: string[]) =>
    createCredential(compute.database, { tenantId, name: 't', permissions, clock }).then((c) => c.token);
  root = await make('root', ['compute:*']);
  acme = await make('acme', ['compute:image-signers:*']);
});
afterAll(async () => {
  await compute?.close();
});
// Each test starts from an empty allowlist and adds the signers it lists, verifies against or revokes: the lists and
// the verifier then see those alone, whatever ran before.
beforeEach(async () => {
  await compute.database.query('DELETE FROM pki_image_signers');
});

describe('imageSigners', () => {
  it('allowlists signers over the API; the verifier then accepts what they sign', async () => {
    const release = await api.imageSigners.add(root, {
      tenantId: 'root',
      name: 'release',
      publicKey: rootKey.publicKeyPem,
      public: true,
    });
    expect(release).toMatchObject({ tenantId: 'root', name: 'release', algorithm: 'ed25519', public: true });
    now += 1_000;
    const own = await api.imageSigners.add(acme, {
      tenantId: 'acme',
      name: 'acme ci',
      publicKey: acmeKey.publicJwk as unknown as Json,
    });
    expect(own).toMatchObject({
      tenantId: 'acme',
      public: false,
      revokedAt: null,
      createdAt: clock.now().toISOString(),
    });

    const signature = signToBase64Url(acmeKey.privateKeyPem, imageSigningBytes(digest));
    expect(await imageVerifier(compute.database, { tenantId: 'acme', digest, signature })).toEqual({
      signerId: own.id,
    });
    const other = await refusal(imageVerifier(compute.database, { tenantId: 'globex', digest, signature }));
    expect(other.code).toBe('PERMISSION_DENIED');

    const acmeList = await api.imageSigners.list(acme, { tenantId: 'acme', limit: 1 });
    const next = await api.imageSigners.list(acme, { tenantId: 'acme', cursor: acmeList.nextCursor as string });
    expect([...acmeList.items, ...next.items].map((s) => s.id)).toEqual([own.id, release.id]);
    expect(next.nextCursor).toBeNull();
    const globexList = await api.imageSigners.list(root, { tenantId: 'globex' });
    expect(globexList.items.map((s) => s.id)).toEqual([release.id]);
  });

  it('refuses a public signer from a tenant, a malformed key at its path, and another tenant', async () => {
    let error = await refusal(
      api.imageSigners.add(acme, { tenantId: 'acme', name: 'x', publicKey: acmeKey.publicKeyPem, public: true }),
    );
    expect([error.code, error.details.reason]).toEqual(['PERMISSION_DENIED', 'public-requires-root']);
    error = await refusal(api.imageSigners.add(acme, { tenantId: 'acme', name: 'x', publicKey: 'not a key' }));
    expect([error.code, error.details.path]).toEqual(['INVALID_INPUT', ['publicKey']]);
    error = await refusal(
      api.imageSigners.add(acme, { tenantId: 'globex', name: 'x', publicKey: acmeKey.publicKeyPem }),
    );
    expect([error.code, error.details.path]).toEqual(['NOT_FOUND', ['tenantId']]);
    error = await refusal(api.imageSigners.list(acme, { tenantId: 'acme', cursor: 'bm9wZQ' }));
    expect([error.code, error.details.path]).toEqual(['INVALID_INPUT', ['cursor']]);
  });

  it('revokes a signer of the tenant only; a public one of root is NOT_FOUND to a tenant', async () => {
    const release = await api.imageSigners.add(root, {
      tenantId: 'root',
      name: 'release',
      publicKey: rootKey.publicKeyPem,
      public: true,
    });
    const own = await api.imageSigners.add(acme, {
      tenantId: 'acme',
      name: 'acme ci',
      publicKey: acmeKey.publicKeyPem,
    });
    // Both are the tenant's to verify with; only its own is the tenant's to revoke.
    const { items } = await api.imageSigners.list(acme, { tenantId: 'acme' });
    expect(items.map((s) => s.id).sort()).toEqual([own.id, release.id].sort());
    const error = await refusal(api.imageSigners.revoke(acme, { tenantId: 'acme', signerId: release.id }));
    expect([error.code, error.details.path]).toEqual(['NOT_FOUND', ['signerId']]);
    const signature = signToBase64Url(acmeKey.privateKeyPem, imageSigningBytes(digest));
    expect(await imageVerifier(compute.database, { tenantId: 'acme', digest, signature })).toEqual({
      signerId: own.id,
    });
    const revoked = await api.imageSigners.revoke(acme, { tenantId: 'acme', signerId: own.id });
    expect(revoked.revokedAt).toBe(clock.now().toISOString());
    const refused = await refusal(imageVerifier(compute.database, { tenantId: 'acme', digest, signature }));
    expect(refused.code).toBe('PERMISSION_DENIED');
  });
});

describe('the imageSigners group in the OpenAPI document', () => {
  it('describes each method with its permission and input schema', () => {
    const doc = createOpenApiDocument(compute.registry.apiGroups);
    const add = doc.paths['/v1/imageSigners.add']?.post as Record<string, unknown>;
    expect(add['x-permission']).toBe('compute:image-signers:manage');
    expect(JSON.stringify(add.requestBody)).toContain('publicKey');
    expect(doc.paths['/v1/imageSigners.list']).toBeDefined();
    expect(doc.paths['/v1/imageSigners.revoke']).toBeDefined();
  });
});
