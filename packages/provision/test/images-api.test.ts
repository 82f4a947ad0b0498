import { createHash, randomBytes } from 'node:crypto';
import {
  type ApiClient,
  betterCompute,
  type Clock,
  type Compute,
  ComputeError,
  createCredential,
} from '@better-compute/core';
import { addImageSigner, generateSigningKeyPair, imageSigningBytes, pki, signToBase64Url } from '@better-compute/pki';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ImagesApi, provisionModule } from '../src';

// The `images` API group: register (verified by digest against the allowlisted signers, errors keeping their codes),
// list and get as the tenant's profiles resolve images, tenant-scoped.

let now = new Date('2026-03-01T00:00:00Z').getTime();
const clock: Clock = { now: () => new Date(now) };
const digestOf = (text: string) => `sha256:${createHash('sha256').update(text).digest('hex')}`;
const acmeKey = generateSigningKeyPair('ed25519');
const rootKey = generateSigningKeyPair('ed25519');
const sign = (key: { privateKeyPem: string }, digest: string) =>
  signToBase64Url(key.privateKeyPem, imageSigningBytes(digest));

let compute: Compute;
let api: ApiClient<{ images: ImagesApi }>;
let root: string;
let acme: string;
let acmeReader: string;

async function refusal(promise: Promise<unknown>): Promise<ComputeError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ComputeError);
  return error as ComputeError;
}

function image(tenantId: string, key: { privateKeyPem: string }, name: string, version: string) {
  const digest = digestOf(`${tenantId} ${name} ${version}`);
  return {
    tenantId,
    name,
    version,
    digest,
    signature: sign(key, digest),
    url: `https://images.example/${name}-${version}.img`,
  };
}

beforeAll(async () => {
  const security = pki({ key: randomBytes(32).toString('hex') });
  compute = await betterCompute({ clock, modules: [security.module, provisionModule()] });
  api = compute.api as unknown as typeof api;
  await compute.database.query(
    `INSERT INTO tenants (id, name, created_at) VALUES ('acme', 'Acme', $1), ('globex', 'Globex', $1)`,
    [clock.now()],
  );
  await compute.database.transaction(async (tx) => {
    await addImageSigner(tx, { tenantId: 'acme', name: 'acme', publicKey: acmeKey.publicJwk }, { clock });
    await addImageSigner(tx, { tenantId: 'root', name: 'root', publicKey: rootKey.publicKeyPem }, { clock });
  });
  const make = (tenantId: string, permissions: string[]) =>
    createCredential(compute.database, { tenantId, name: 't', permissions, clock }).then((c) => c.token);
  root = await make('root', ['compute:*']);
  acme = await make('acme', ['compute:images:*']);
  acmeReader = await make('acme', ['compute:images:read']);
});
afterAll(async () => {
  await compute?.close();
});

describe('images.register', () => {
  it('registers a signed image in the tenant’s catalog and answers it', async () => {
    const input = image('acme', acmeKey, 'ubuntu/noble', '24.04.1');
    const registered = await api.images.register(acme, input);
    expect(registered).toMatchObject({
      tenantId: 'acme',
      ref: 'ubuntu/noble@24.04.1',
      digest: input.digest,
      url: input.url,
      public: false,
      createdAt: clock.now().toISOString(),
    });
    expect(registered.id).toMatch(/^img_/);
    const again = await refusal(api.images.register(acme, input));
    expect([again.code, again.details.path]).toEqual(['CONFLICT', ['version']]);
  });

  it('keeps the verifier’s codes: an unknown signer or a bad signature is PERMISSION_DENIED', async () => {
    const bySomeoneElse = { ...image('acme', rootKey, 'ubuntu/jammy', '22.04'), signerId: undefined };
    let error = await refusal(api.images.register(acme, bySomeoneElse));
    expect(error.code).toBe('PERMISSION_DENIED');
    expect(['signer-unknown', 'signature-invalid']).toContain(error.details.reason);
    error = await refusal(
      api.images.register(acme, { ...image('acme', acmeKey, 'ubuntu/jammy', '22.04'), digest: digestOf('other') }),
    );
    expect([error.code, error.details.reason]).toEqual(['PERMISSION_DENIED', 'signature-invalid']);
  });

  it('refuses malformed input at its path, a public image from a tenant, and another tenant’s catalog', async () => {
    let error = await refusal(api.images.register(acme, { ...image('acme', acmeKey, 'x', '1'), digest: 'md5:1' }));
    expect([error.code, error.details.path]).toEqual(['INVALID_INPUT', ['digest']]);
    error = await refusal(api.images.register(acme, { ...image('acme', acmeKey, 'x', '1'), public: true }));
    expect([error.code, error.details.reason]).toEqual(['PERMISSION_DENIED', 'public-requires-root']);
    error = await refusal(api.images.register(acme, image('globex', acmeKey, 'x', '1')));
    expect([error.code, error.details.path]).toEqual(['NOT_FOUND', ['tenantId']]);
    error = await refusal(api.images.register(acmeReader, image('acme', acmeKey, 'x', '1')));
    expect(error.code).toBe('PERMISSION_DENIED');
  });
});

describe('images.list and images.get', () => {
  // Tenants of its own: what the other tests register (acme's images, globex's flatcar) is not in these catalogs.
  const initechKey = generateSigningKeyPair('ed25519');
  let initechReader: string;
  beforeAll(async () => {
    await compute.database.query(
      `INSERT INTO tenants (id, name, created_at) VALUES ('initech', 'Initech', $1), ('umbrella', 'Umbrella', $1)`,
      [clock.now()],
    );
    await compute.database.transaction((tx) =>
      addImageSigner(tx, { tenantId: 'initech', name: 'initech', publicKey: initechKey.publicJwk }, { clock }),
    );
    initechReader = await createCredential(compute.database, {
      tenantId: 'initech',
      name: 't',
      permissions: ['compute:images:read'],
      clock,
    }).then((c) => c.token);
    // The tenant's own ubuntu/noble, older than the public one it shadows.
    await api.images.register(root, image('initech', initechKey, 'ubuntu/noble', '24.04.1'));
    now += 1_000;
    await api.images.register(root, { ...image('root', rootKey, 'talos', '1.9.2'), public: true });
    now += 1_000;
    await api.images.register(root, { ...image('root', rootKey, 'ubuntu/noble', '24.04.1'), public: true });
    now += 1_000;
    await api.images.register(root, image('root', rootKey, 'root/private', '1'));
  });

  it('lists what the tenant’s profiles resolve, newest first, its own shadowing a public one, with a cursor', async () => {
    const first = await api.images.list(initechReader, { tenantId: 'initech', limit: 1 });
    const second = await api.images.list(initechReader, {
      tenantId: 'initech',
      limit: 1,
      cursor: first.nextCursor as string,
    });
    expect([...first.items, ...second.items].map((i) => [i.ref, i.tenantId])).toEqual([
      ['talos@1.9.2', 'root'],
      ['ubuntu/noble@24.04.1', 'initech'],
    ]);
    expect(second.nextCursor).toBeNull();
    expect(first.items[0]).not.toHaveProperty('signature');
    const umbrella = await api.images.list(root, { tenantId: 'umbrella' });
    expect(umbrella.items.map((i) => [i.ref, i.tenantId])).toEqual([
      ['ubuntu/noble@24.04.1', 'root'],
      ['talos@1.9.2', 'root'],
    ]);
    const named = await api.images.list(root, { tenantId: 'umbrella', name: 'talos' });
    expect(named.items.map((i) => i.ref)).toEqual(['talos@1.9.2']);
    const error = await refusal(api.images.list(initechReader, { tenantId: 'initech', cursor: 'bm9wZQ' }));
    expect([error.code, error.details.path]).toEqual(['INVALID_INPUT', ['cursor']]);
  });

  it('gets an image by name@version as resolveImageRef does; another tenant’s private one is NOT_FOUND', async () => {
    expect(await api.images.get(initechReader, { tenantId: 'initech', ref: 'ubuntu/noble@24.04.1' })).toMatchObject({
      tenantId: 'initech',
      signature: expect.any(String),
    });
    expect(await api.images.get(initechReader, { tenantId: 'initech', ref: 'talos@1.9.2' })).toMatchObject({
      tenantId: 'root',
      public: true,
    });
    let error = await refusal(api.images.get(initechReader, { tenantId: 'initech', ref: 'root/private@1' }));
    expect([error.code, error.details.path]).toEqual(['NOT_FOUND', ['ref']]);
    error = await refusal(api.images.get(initechReader, { tenantId: 'initech', ref: 'no-version' }));
    expect([error.code, error.details.path]).toEqual(['INVALID_INPUT', ['ref']]);
  });
});

describe('the catalog over the API alone', () => {
  it('trusts a signer with imageSigners.add, then registers and gets an image signed by it', async () => {
    const operatorKey = generateSigningKeyPair('ed25519');
    const calls = compute.api as unknown as Record<string, Record<string, (t: string, i: unknown) => Promise<unknown>>>;
    const signer = (await calls.imageSigners?.add?.(root, {
      tenantId: 'globex',
      name: 'globex release',
      publicKey: operatorKey.publicKeyPem,
    })) as { id: string };
    const input = image('globex', operatorKey, 'flatcar', '4081.2.0');
    const registered = await api.images.register(root, input);
    expect(registered).toMatchObject({ tenantId: 'globex', ref: 'flatcar@4081.2.0', signerId: signer.id });
    expect(await api.images.get(root, { tenantId: 'globex', ref: 'flatcar@4081.2.0' })).toEqual(registered);
  });
});
