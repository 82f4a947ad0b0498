import * as v from 'valibot';
import { ComputeError } from '../errors';
import type { ModuleContext } from '../kernel/module';
import type { SqlExecutor } from '../sql/executor';
import { resourceNotFound } from './authorize';
import { createCredential, revokeCredential } from './credentials';
import { defineApiGroup, defineApiMethod } from './define';
import { createdKeySql, cursorSchema, decodeListCursor, encodeListCursor, limitSchema, textSchema } from './inputs';
import { grantsPermission, isPermissionGrant } from './permissions';
import { resolveTenantResource } from './resources';
import type { ResourceRef } from './types';

/** The resource type of a credential, the one `credentials.revoke` is decided on. */
export const COMPUTE_CREDENTIAL = 'compute-credential';

/** A credential as `credentials.list` shows it: never its token nor the token's hash. */
export interface ApiCredential {
  id: string;
  tenantId: string;
  name: string;
  permissions: string[];
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
}

/** What `credentials.create` answers: the credential and its bearer token, shown this once. */
export interface CreatedCredential extends ApiCredential {
  token: string;
}

/** A page of `credentials.list`: newest first; pass `nextCursor` back as `cursor`, `null` on the last page. */
export interface CredentialsPage {
  items: ApiCredential[];
  nextCursor: string | null;
}

const LISTING = 'credentials';
const MAX_GRANTS = 100;

const onTenant = (input: { tenantId: string }, ctx: ModuleContext) => resolveTenantResource(ctx.sql, input.tenantId);

/**
 * Resolves `{ tenantId, credentialId }` to the credential's {@link ResourceRef}; a credential of another tenant and a
 * missing one are the same NOT_FOUND at `['credentialId']`.
 */
export async function resolveCredentialResource(
  sql: SqlExecutor,
  tenantId: string,
  credentialId: string,
): Promise<ResourceRef> {
  const path = ['credentialId'];
  const { rowCount } = await sql.query('SELECT 1 FROM credentials WHERE id = $1 AND tenant_id = $2', [
    credentialId,
    tenantId,
  ]);
  if (rowCount === 0) throw resourceNotFound(COMPUTE_CREDENTIAL, path);
  return { type: COMPUTE_CREDENTIAL, tenantId, id: credentialId, path };
}

/**
 * Whether the grants `held` cover the grant `wanted`: a concrete permission as {@link grantsPermission} decides,
 * `compute:<area>:*` only under `compute:<area>:*` or `compute:*`, and `compute:*` only under itself. A credential never
 * mints more than it holds.
 *
 * @example
 * ```ts
 * grantCovers(['compute:metal:*'], 'compute:metal:read'); // true
 * grantCovers(['compute:metal:read', 'compute:metal:manage'], 'compute:metal:*'); // false
 * ```
 */
export function grantCovers(held: readonly string[], wanted: string): boolean {
  if (held.includes('compute:*')) return true;
  if (wanted === 'compute:*') return false;
  if (wanted.endsWith(':*')) return held.includes(wanted);
  return grantsPermission(held, wanted);
}

interface CredentialRow {
  id: string;
  tenant_id: string;
  name: string;
  permissions: unknown;
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
  created_key: string;
}

function toApiCredential(row: CredentialRow): ApiCredential {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    permissions: Array.isArray(row.permissions) ? row.permissions.filter((p) => typeof p === 'string') : [],
    createdAt: row.created_at.toISOString(),
    expiresAt: row.expires_at?.toISOString() ?? null,
    revokedAt: row.revoked_at?.toISOString() ?? null,
  };
}

function parseExpiry(value: string | undefined): Date | undefined {
  if (value === undefined) return undefined;
  const at = new Date(value);
  if (Number.isNaN(at.getTime())) {
    throw new ComputeError('INVALID_INPUT', 'expiresAt must be an ISO 8601 time', { details: { path: ['expiresAt'] } });
  }
  return at;
}

/**
 * A credential never outlives the one that created it, as it never holds more: without `expiresAt` it ends when the
 * caller's does, and a later one is PERMISSION_DENIED at `['expiresAt']`.
 */
async function boundedByCaller(tx: SqlExecutor, callerId: string, asked: Date | undefined): Promise<Date | undefined> {
  const { rows } = await tx.query<{ expires_at: Date | null }>('SELECT expires_at FROM credentials WHERE id = $1', [
    callerId,
  ]);
  const callerExpiry = rows[0]?.expires_at ?? undefined;
  if (callerExpiry === undefined) return asked;
  if (asked === undefined) return callerExpiry;
  if (asked.getTime() > callerExpiry.getTime()) {
    throw new ComputeError(
      'PERMISSION_DENIED',
      `the credential cannot outlive the one creating it, which expires at ${callerExpiry.toISOString()}`,
      { details: { path: ['expiresAt'], callerExpiresAt: callerExpiry.toISOString() } },
    );
  }
  return asked;
}

/**
 * The `credentials` API group of the core module: `create` (`compute:credentials:manage`, decided on the tenant)
 * mints a credential of the tenant whose grants are all covered by the caller's own ({@link grantCovers}; otherwise
 * PERMISSION_DENIED at `['permissions', i]`), never outlives the caller's credential (no `expiresAt`: the caller's;
 * a later one: PERMISSION_DENIED at `['expiresAt']`) and answers its token once; `list` (`compute:credentials:read`) shows the
 * tenant's credentials, newest first, never a token or its hash; `revoke` (`compute:credentials:manage`, decided on the
 * credential) refuses its token from then on. A tenant's credential acts on its own tenant, a root one on any. Each
 * change publishes `core.credential.created` / `core.credential.revoked` (no token in it).
 *
 * @example
 * ```ts
 * const { id, token } = await compute.api.credentials.create(rootToken, {
 *   tenantId: 'acme', name: 'ci', permissions: ['compute:workflows:read'],
 * });
 * ```
 */
export function credentialsApi() {
  const create = defineApiMethod({
    input: v.object({
      tenantId: textSchema('tenantId'),
      name: textSchema('name', 200),
      permissions: v.pipe(
        v.array(v.string('a grant must be a string'), 'permissions must be a list of grants'),
        v.minLength(1, 'permissions must not be empty'),
        v.maxLength(MAX_GRANTS, `permissions must hold at most ${MAX_GRANTS} grants`),
      ),
      expiresAt: v.optional(textSchema('expiresAt', 64)),
    }),
    permission: 'compute:credentials:manage',
    resource: onTenant,
    description:
      'Creates an API credential of the tenant and answers its token this once (only its hash is stored). Its ' +
      "grants must be covered by the caller's own: a credential never mints more than it holds.",
    handler: async (input, ctx): Promise<CreatedCredential> => {
      input.permissions.forEach((grant, i) => {
        if (!isPermissionGrant(grant)) {
          throw new ComputeError(
            'INVALID_INPUT',
            'a grant looks like compute:<area>:<verb>, compute:<area>:* or compute:*',
            { details: { path: ['permissions', i] } },
          );
        }
      });
      input.permissions.forEach((grant, i) => {
        if (!grantCovers(ctx.principal.permissions, grant)) {
          throw new ComputeError('PERMISSION_DENIED', `the credential cannot grant ${grant}, which it does not hold`, {
            details: { path: ['permissions', i], permission: grant },
          });
        }
      });
      const asked = parseExpiry(input.expiresAt);
      const permissions = [...new Set(input.permissions)];
      return ctx.sql.transaction(async (tx) => {
        const expiresAt = await boundedByCaller(tx, ctx.principal.credentialId, asked);
        const { id, token } = await createCredential(tx, {
          tenantId: input.tenantId,
          name: input.name,
          permissions,
          ...(expiresAt ? { expiresAt } : {}),
          clock: ctx.clock,
        });
        const { rows } = await tx.query<CredentialRow>(
          `SELECT id, tenant_id, name, permissions, created_at, expires_at, revoked_at, '' AS created_key
           FROM credentials WHERE id = $1`,
          [id],
        );
        await ctx.events.publish(tx, {
          tenantId: input.tenantId,
          subject: `credential/${id}`,
          type: 'core.credential.created',
          data: {
            credentialId: id,
            name: input.name,
            permissions,
            expiresAt: expiresAt?.toISOString() ?? null,
            createdBy: ctx.principal.credentialId,
          },
        });
        return { ...toApiCredential(rows[0] as CredentialRow), token };
      });
    },
  });

  const list = defineApiMethod({
    input: v.object({
      tenantId: textSchema('tenantId'),
      limit: limitSchema(100, 20),
      cursor: cursorSchema,
    }),
    permission: 'compute:credentials:read',
    resource: onTenant,
    description:
      "The tenant's credentials, newest first, with their grants, expiry and revocation; never a token or its hash.",
    handler: async (input, ctx): Promise<CredentialsPage> => {
      const after = input.cursor === undefined ? undefined : decodeListCursor(input.cursor, LISTING);
      const { rows } = await ctx.sql.query<CredentialRow>(
        `SELECT id, tenant_id, name, permissions, created_at, expires_at, revoked_at,
           ${createdKeySql('created_at')} AS created_key
         FROM credentials
         WHERE tenant_id = $1 AND ($2::timestamptz IS NULL OR (created_at, id) < ($2::timestamptz, $3::text))
         ORDER BY created_at DESC, id DESC LIMIT $4`,
        [input.tenantId, after?.createdKey ?? null, after?.id ?? null, input.limit + 1],
      );
      const page = rows.slice(0, input.limit);
      const last = page.at(-1);
      return {
        items: page.map(toApiCredential),
        nextCursor: rows.length > input.limit && last ? encodeListCursor(LISTING, last.created_key, last.id) : null,
      };
    },
  });

  const revoke = defineApiMethod({
    input: v.object({ tenantId: textSchema('tenantId'), credentialId: textSchema('credentialId') }),
    permission: 'compute:credentials:manage',
    resource: (input, ctx) => resolveCredentialResource(ctx.sql, input.tenantId, input.credentialId),
    description: 'Revokes a credential: its token is refused from now on. Revoking again keeps the first time.',
    handler: async (input, ctx): Promise<{ id: string; revokedAt: string }> =>
      ctx.sql.transaction(async (tx) => {
        const { revokedAt } = await revokeCredential(tx, input.credentialId, ctx.clock);
        await ctx.events.publish(tx, {
          tenantId: input.tenantId,
          subject: `credential/${input.credentialId}`,
          type: 'core.credential.revoked',
          data: {
            credentialId: input.credentialId,
            revokedAt: revokedAt.toISOString(),
            revokedBy: ctx.principal.credentialId,
          },
        });
        return { id: input.credentialId, revokedAt: revokedAt.toISOString() };
      }),
  });

  return defineApiGroup('credentials', { create, list, revoke });
}

/** The `credentials` group {@link credentialsApi} returns. */
export type CredentialsApi = ReturnType<typeof credentialsApi>;
