import { createHash } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  authenticate,
  authorize,
  createCredential,
  resolveNodeResource,
  resolveTenantResource,
  revokeCredential,
} from '../../src/api';
import type { Clock } from '../../src/clock';
import type { ComputeError } from '../../src/errors';
import { newId } from '../../src/ids';
import type { SqlExecutor } from '../../src/sql';
import type { ScratchDatabase } from '../support/databases';
import { manualClock, migrateCore } from '../support/kernel';

export { manualClock, migrateCore } from '../support/kernel';

/** Empties the tables the API tests use and inserts the tenants `root`, `acme` and `globex`. */
export async function resetTenants(db: SqlExecutor, clock: Clock): Promise<void> {
  await db.query('TRUNCATE tenants CASCADE');
  for (const id of ['root', 'acme', 'globex']) {
    await db.query('INSERT INTO tenants (id, name, created_at) VALUES ($1, $1, $2)', [id, clock.now()]);
  }
}

/** Inserts a node row of a tenant and returns its id. */
export async function insertNode(db: SqlExecutor, tenantId: string, clock: Clock, kind = 'machine'): Promise<string> {
  const id = newId('node');
  await db.query('INSERT INTO nodes (id, tenant_id, kind, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)', [
    id,
    tenantId,
    kind,
    clock.now(),
  ]);
  return id;
}

async function rejection(promise: Promise<unknown>): Promise<ComputeError> {
  try {
    await promise;
  } catch (error) {
    return error as ComputeError;
  }
  throw new Error('expected a rejection');
}

function body(error: ComputeError) {
  return JSON.stringify(error.toJSON());
}

/** Credentials, authentication and resource resolution, run once per backend. */
export function defineCredentialsConformance(create: () => Promise<ScratchDatabase>): void {
  let scratch: ScratchDatabase;
  const clock = manualClock();
  beforeAll(async () => {
    scratch = await create();
    await migrateCore(scratch.db, clock);
  });
  afterAll(async () => {
    await scratch?.drop();
  });
  beforeEach(async () => {
    await resetTenants(scratch.db, clock);
  });

  describe('credentials', () => {
    it('authenticates a fresh token to its tenant and grants', async () => {
      const { id, token } = await createCredential(scratch.db, {
        tenantId: 'acme',
        name: 'ci',
        permissions: ['compute:workflows:read', 'compute:workflows:read', 'compute:nodes:*'],
        clock,
      });
      expect(id).toMatch(/^cred_[0-9a-z]{26}$/);
      expect(token).toMatch(/^bc_[0-9a-z]{26}_[A-Za-z0-9_-]{43}$/);
      expect(token.slice(3, 29)).toBe(id.slice(5));
      const principal = await authenticate(scratch.db, token, clock);
      expect(principal).toEqual({
        credentialId: id,
        tenantId: 'acme',
        permissions: ['compute:workflows:read', 'compute:nodes:*'],
      });
    });

    it('stores only the SHA-256 of the token, never the token', async () => {
      const { id, token } = await createCredential(scratch.db, {
        tenantId: 'acme',
        name: 'ci',
        permissions: ['compute:*'],
        clock,
      });
      const { rows } = await scratch.db.query('SELECT * FROM credentials WHERE id = $1', [id]);
      expect(rows[0]?.token_hash).toBe(createHash('sha256').update(token).digest('hex'));
      expect(JSON.stringify(rows)).not.toContain(token.slice(30));
    });

    it('refuses unknown, malformed, revoked and expired tokens with one indistinguishable error', async () => {
      const live = await createCredential(scratch.db, {
        tenantId: 'acme',
        name: 'a',
        permissions: ['compute:*'],
        clock,
      });
      const revoked = await createCredential(scratch.db, {
        tenantId: 'acme',
        name: 'b',
        permissions: ['compute:*'],
        clock,
      });
      await revokeCredential(scratch.db, revoked.id, clock);
      const expiring = await createCredential(scratch.db, {
        tenantId: 'acme',
        name: 'c',
        permissions: ['compute:*'],
        expiresAt: new Date(clock.now().getTime() + 60_000),
        clock,
      });
      await expect(authenticate(scratch.db, expiring.token, clock)).resolves.toMatchObject({ tenantId: 'acme' });
      clock.advance(60_000);

      const lastChar = live.token.endsWith('A') ? 'B' : 'A';
      const unknown = `${live.token.slice(0, -1)}${lastChar}`;
      const candidates = [unknown, 'bc_garbage', '', `Bearer ${live.token}`, revoked.token, expiring.token];
      const errors = await Promise.all(candidates.map((token) => rejection(authenticate(scratch.db, token, clock))));
      const bodies = new Set(errors.map(body));
      expect(bodies.size).toBe(1);
      expect(errors[0]?.code).toBe('UNAUTHENTICATED');
      expect(errors[0]?.details).toEqual({});
      for (const [i, error] of errors.entries()) expect(body(error)).not.toContain(candidates[i] || '\u0000');
      const notString = await rejection(authenticate(scratch.db, 42, clock));
      expect(body(notString)).toBe([...bodies][0]);
    });

    it('keeps the first revocation time and refuses an unknown id as NOT_FOUND', async () => {
      const { id } = await createCredential(scratch.db, {
        tenantId: 'acme',
        name: 'a',
        permissions: ['compute:*'],
        clock,
      });
      const first = await revokeCredential(scratch.db, id, clock);
      clock.advance(1_000);
      const second = await revokeCredential(scratch.db, id, clock);
      expect(second.revokedAt).toEqual(first.revokedAt);
      await expect(revokeCredential(scratch.db, 'cred_missing', clock)).rejects.toMatchObject({
        code: 'NOT_FOUND',
        details: { path: ['id'] },
      });
    });

    it('refuses a tenant or name PostgreSQL cannot store, with the path', async () => {
      const base = { tenantId: 'acme', name: 'ci', permissions: ['compute:*'], clock };
      for (const [patch, path] of [
        [{ tenantId: 'ac\u0000me' }, ['tenantId']],
        [{ name: 'ci \u0000' }, ['name']],
        [{ name: 'ci \udc00' }, ['name']],
      ] as const) {
        const error = await rejection(createCredential(scratch.db, { ...base, ...patch }));
        expect({ code: error.code, path: error.details.path }).toEqual({ code: 'INVALID_INPUT', path });
      }
    });

    it('refuses bad credential input with the offending path and an unknown tenant as NOT_FOUND', async () => {
      const base = { tenantId: 'acme', name: 'ci', permissions: ['compute:*'], clock };
      const cases: [Record<string, unknown>, (string | number)[]][] = [
        [{ name: '' }, ['name']],
        [{ permissions: [] }, ['permissions']],
        [{ permissions: ['compute:workflows:read', 'compute:*:read'] }, ['permissions', 1]],
        [{ permissions: ['admin'] }, ['permissions', 0]],
        [{ expiresAt: new Date(clock.now().getTime() - 1) }, ['expiresAt']],
        [{ expiresAt: new Date(Number.NaN) }, ['expiresAt']],
        [{ tenantId: '' }, ['tenantId']],
      ];
      for (const [patch, path] of cases) {
        const error = await rejection(createCredential(scratch.db, { ...base, ...patch } as typeof base));
        expect({ code: error.code, path: error.details.path }).toEqual({ code: 'INVALID_INPUT', path });
      }
      await expect(createCredential(scratch.db, { ...base, tenantId: 'nobody' })).rejects.toMatchObject({
        code: 'NOT_FOUND',
        details: { path: ['tenantId'] },
      });
      const { rowCount } = await scratch.db.query('SELECT 1 FROM credentials');
      expect(rowCount).toBe(0);
    });
  });

  describe('node resources', () => {
    it('resolves an own node to a compute-node reference with its kind', async () => {
      const nodeId = await insertNode(scratch.db, 'acme', clock, 'site-agent');
      await expect(resolveNodeResource(scratch.db, 'acme', nodeId)).resolves.toEqual({
        type: 'compute-node',
        tenantId: 'acme',
        id: nodeId,
        kind: 'site-agent',
        path: ['nodeId'],
      });
    });

    it('treats a node of another tenant exactly like a missing node', async () => {
      const globexNode = await insertNode(scratch.db, 'globex', clock);
      const foreign = await rejection(resolveNodeResource(scratch.db, 'acme', globexNode));
      const missing = await rejection(resolveNodeResource(scratch.db, 'acme', newId('node')));
      expect(foreign.code).toBe('NOT_FOUND');
      expect(body(foreign)).toBe(body(missing));
      expect(body(foreign)).not.toContain(globexNode);
    });

    it('makes an acme credential naming a globex node get the body of a missing node', async () => {
      const { token } = await createCredential(scratch.db, {
        tenantId: 'acme',
        name: 'a',
        permissions: ['compute:*'],
        clock,
      });
      const principal = await authenticate(scratch.db, token, clock);
      const globexNode = await insertNode(scratch.db, 'globex', clock);
      const resource = await resolveNodeResource(scratch.db, 'globex', globexNode);
      let denied: ComputeError | undefined;
      try {
        authorize(principal, 'compute:workflows:read', resource);
      } catch (error) {
        denied = error as ComputeError;
      }
      const missing = await rejection(resolveNodeResource(scratch.db, 'globex', newId('node')));
      expect(denied && body(denied)).toBe(body(missing));
    });

    it('resolves a tenant and refuses a missing one', async () => {
      await expect(resolveTenantResource(scratch.db, 'acme')).resolves.toMatchObject({
        type: 'compute-tenant',
        tenantId: 'acme',
      });
      await expect(resolveTenantResource(scratch.db, 'nobody')).rejects.toMatchObject({
        code: 'NOT_FOUND',
        details: { path: ['tenantId'] },
      });
    });
  });
}
