import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, type CredentialsApi, createCredential, grantCovers } from '../src/api';
import { ComputeError } from '../src/errors';
import { betterCompute, type Compute } from '../src/kernel';
import { manualClock } from './support/kernel';

// The core module's `credentials` group: create (never more than the caller holds; the token once), list (never a
// token or its hash), revoke; tenant-scoped like every method.

const clock = manualClock();
let compute: Compute;
let api: ApiClient<{ credentials: CredentialsApi }>;
let root: string;
let acmeAdmin: string;

async function refusal(promise: Promise<unknown>): Promise<ComputeError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ComputeError);
  return error as ComputeError;
}

beforeAll(async () => {
  compute = await betterCompute({ clock });
  api = compute.api as unknown as typeof api;
  await compute.database.query(
    `INSERT INTO tenants (id, name, created_at) VALUES ('acme', 'Acme', $1), ('globex', 'Globex', $1)`,
    [clock.now()],
  );
  root = (
    await createCredential(compute.database, { tenantId: 'root', name: 'root', permissions: ['compute:*'], clock })
  ).token;
  acmeAdmin = (
    await createCredential(compute.database, {
      tenantId: 'acme',
      name: 'acme admin',
      permissions: ['compute:credentials:*', 'compute:metal:read', 'compute:workflows:*'],
      clock,
    })
  ).token;
});
afterAll(async () => {
  await compute?.close();
});

describe('credentials.create', () => {
  it('mints a credential of the caller’s tenant and answers its token once; the token works', async () => {
    const created = await api.credentials.create(acmeAdmin, {
      tenantId: 'acme',
      name: 'ci',
      permissions: ['compute:metal:read', 'compute:workflows:manage'],
    });
    expect(created).toMatchObject({
      tenantId: 'acme',
      name: 'ci',
      permissions: ['compute:metal:read', 'compute:workflows:manage'],
      createdAt: clock.now().toISOString(),
      expiresAt: null,
      revokedAt: null,
    });
    expect(created.token).toMatch(/^bc_/);
    // The new token authenticates: it may read its tenant's credentials? No: it does not hold credentials:read.
    const error = await refusal(api.credentials.list(created.token, { tenantId: 'acme' }));
    expect(error.code).toBe('PERMISSION_DENIED');
  });

  it('refuses a grant the caller does not hold, wider wildcards included, at the grant’s path', async () => {
    for (const [grant, index] of [
      ['compute:metal:manage', 1],
      ['compute:metal:*', 1],
      ['compute:*', 1],
    ] as const) {
      const error = await refusal(
        api.credentials.create(acmeAdmin, {
          tenantId: 'acme',
          name: 'wider',
          permissions: ['compute:metal:read', grant],
        }),
      );
      expect(error.code).toBe('PERMISSION_DENIED');
      expect(error.details.path).toEqual(['permissions', index]);
    }
    // The caller's own wildcard may be handed on, or narrowed.
    await api.credentials.create(acmeAdmin, { tenantId: 'acme', name: 'same', permissions: ['compute:workflows:*'] });
    expect(grantCovers(['compute:workflows:*'], 'compute:workflows:read')).toBe(true);
    expect(grantCovers(['compute:workflows:read', 'compute:workflows:manage'], 'compute:workflows:*')).toBe(false);
  });

  it('refuses a malformed grant or expiry as INVALID_INPUT with its path, and an expiry in the past', async () => {
    let error = await refusal(
      api.credentials.create(acmeAdmin, { tenantId: 'acme', name: 'bad', permissions: ['compute:*:read'] }),
    );
    expect([error.code, error.details.path]).toEqual(['INVALID_INPUT', ['permissions', 0]]);
    error = await refusal(
      api.credentials.create(acmeAdmin, {
        tenantId: 'acme',
        name: 'bad',
        permissions: ['compute:metal:read'],
        expiresAt: 'tomorrow',
      }),
    );
    expect([error.code, error.details.path]).toEqual(['INVALID_INPUT', ['expiresAt']]);
    error = await refusal(
      api.credentials.create(acmeAdmin, {
        tenantId: 'acme',
        name: 'bad',
        permissions: ['compute:metal:read'],
        expiresAt: '2020-01-01T00:00:00Z',
      }),
    );
    expect([error.code, error.details.path]).toEqual(['INVALID_INPUT', ['expiresAt']]);
  });

  it('keeps a tenant to its own tenant (another is NOT_FOUND) while root mints for any, with an expiry', async () => {
    const error = await refusal(
      api.credentials.create(acmeAdmin, { tenantId: 'globex', name: 'x', permissions: ['compute:metal:read'] }),
    );
    expect(error.code).toBe('NOT_FOUND');
    const expiresAt = new Date(clock.now().getTime() + 3_600_000).toISOString();
    const created = await api.credentials.create(root, {
      tenantId: 'globex',
      name: 'globex admin',
      permissions: ['compute:*'],
      expiresAt,
    });
    expect(created).toMatchObject({ tenantId: 'globex', expiresAt });
  });

  it('never outlives the credential that creates it: no expiry inherits the caller’s, a later one is refused', async () => {
    const callerExpiry = new Date(clock.now().getTime() + 3_600_000).toISOString();
    const expiring = await api.credentials.create(acmeAdmin, {
      tenantId: 'acme',
      name: 'contractor',
      permissions: ['compute:credentials:*', 'compute:metal:read'],
      expiresAt: callerExpiry,
    });
    const inherited = await api.credentials.create(expiring.token, {
      tenantId: 'acme',
      name: 'contractor ci',
      permissions: ['compute:metal:read'],
    });
    expect(inherited.expiresAt).toBe(callerExpiry);
    const sooner = new Date(clock.now().getTime() + 60_000).toISOString();
    const shorter = await api.credentials.create(expiring.token, {
      tenantId: 'acme',
      name: 'contractor short',
      permissions: ['compute:metal:read'],
      expiresAt: sooner,
    });
    expect(shorter.expiresAt).toBe(sooner);
    const error = await refusal(
      api.credentials.create(expiring.token, {
        tenantId: 'acme',
        name: 'contractor forever',
        permissions: ['compute:metal:read'],
        expiresAt: new Date(clock.now().getTime() + 7_200_000).toISOString(),
      }),
    );
    expect([error.code, error.details.path]).toEqual(['PERMISSION_DENIED', ['expiresAt']]);
    const listed = await api.credentials.list(acmeAdmin, { tenantId: 'acme', limit: 100 });
    expect(listed.items.map((c) => c.name)).not.toContain('contractor forever');
  });

  it('publishes core.credential.created without the token', async () => {
    const created = await api.credentials.create(acmeAdmin, {
      tenantId: 'acme',
      name: 'audited',
      permissions: ['compute:metal:read'],
    });
    const { rows } = await compute.database.query<{ type: string; data: unknown }>(
      `SELECT type, data FROM events WHERE subject = $1`,
      [`credential/${created.id}`],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]?.type).toBe('core.credential.created');
    expect(JSON.stringify(rows[0]?.data)).not.toContain(created.token);
  });
});

describe('credentials.list and credentials.revoke', () => {
  it('lists the tenant’s credentials newest first with a cursor, never a token or its hash', async () => {
    const names: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      clock.advance(1_000);
      names.push(`page-${i}`);
      await api.credentials.create(acmeAdmin, {
        tenantId: 'acme',
        name: `page-${i}`,
        permissions: ['compute:metal:read'],
      });
    }
    const first = await api.credentials.list(acmeAdmin, { tenantId: 'acme', limit: 2 });
    expect(first.items.map((c) => c.name)).toEqual(['page-2', 'page-1']);
    expect(first.nextCursor).not.toBeNull();
    const second = await api.credentials.list(acmeAdmin, {
      tenantId: 'acme',
      limit: 2,
      cursor: first.nextCursor as string,
    });
    expect(second.items[0]?.name).toBe('page-0');
    const all = await api.credentials.list(acmeAdmin, { tenantId: 'acme', limit: 100 });
    expect(all.nextCursor).toBeNull();
    expect(all.items.every((c) => c.tenantId === 'acme')).toBe(true);
    const text = JSON.stringify(all);
    expect(text).not.toMatch(/bc_|token|hash/i);
    const error = await refusal(api.credentials.list(acmeAdmin, { tenantId: 'acme', cursor: 'bm9wZQ' }));
    expect([error.code, error.details.path]).toEqual(['INVALID_INPUT', ['cursor']]);
  });

  it('revokes a credential of the tenant: its token is refused, and another tenant’s is NOT_FOUND', async () => {
    const victim = await api.credentials.create(acmeAdmin, {
      tenantId: 'acme',
      name: 'short-lived',
      permissions: ['compute:credentials:read'],
    });
    await api.credentials.list(victim.token, { tenantId: 'acme' });
    const revoked = await api.credentials.revoke(acmeAdmin, { tenantId: 'acme', credentialId: victim.id });
    expect(revoked).toEqual({ id: victim.id, revokedAt: clock.now().toISOString() });
    const error = await refusal(api.credentials.list(victim.token, { tenantId: 'acme' }));
    expect(error.code).toBe('UNAUTHENTICATED');
    const listed = await api.credentials.list(acmeAdmin, { tenantId: 'acme', limit: 100 });
    expect(listed.items.find((c) => c.id === victim.id)?.revokedAt).toBe(revoked.revokedAt);

    const globex = await api.credentials.create(root, {
      tenantId: 'globex',
      name: 'g',
      permissions: ['compute:metal:read'],
    });
    for (const tenantId of ['acme', 'globex']) {
      const notFound = await refusal(api.credentials.revoke(acmeAdmin, { tenantId, credentialId: globex.id }));
      // The same error whether the credential is missing from acme or is globex's: nothing tells that it exists.
      expect([notFound.code, notFound.message, notFound.details.path]).toEqual([
        'NOT_FOUND',
        'compute-credential not found',
        ['credentialId'],
      ]);
    }
  });
});
