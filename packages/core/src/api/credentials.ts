import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../clock';
import { ComputeError } from '../errors';
import { ulid } from '../ids';
import { assertStorableText } from '../json/storable-text';
import type { SqlExecutor } from '../sql/executor';
import { isPermissionGrant } from './permissions';
import type { Principal } from './types';

/** What `createCredential` takes. */
export interface CreateCredentialInput {
  tenantId: string;
  /** A label for people: who or what holds the token. */
  name: string;
  /** Permission grants: `compute:<area>:<verb>`, `compute:<area>:*` or `compute:*`. */
  permissions: readonly string[];
  /** When the token stops working; left out, it works until revoked. */
  expiresAt?: Date;
  clock: Clock;
}

// `bc_<ulid of the id>_<256-bit secret as unpadded base64url>`. The ulid is fixed-length, so the `_` a base64url
// secret may contain cannot shift the split.
const TOKEN = /^bc_([0-9a-hjkmnp-tv-z]{26})_[A-Za-z0-9_-]{43}$/;
const MAX_NAME_LENGTH = 200;
const UNAUTHENTICATED_MESSAGE = 'the credential is not valid';

function hashToken(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

function unauthenticated(): ComputeError {
  // One message and no details for every failure, so a caller learns nothing about which check refused the token.
  return new ComputeError('UNAUTHENTICATED', UNAUTHENTICATED_MESSAGE);
}

function invalidInput(message: string, path: (string | number)[]): ComputeError {
  return new ComputeError('INVALID_INPUT', message, { details: { path } });
}

function checkPermissions(permissions: unknown): string[] {
  if (!Array.isArray(permissions) || permissions.length === 0) {
    throw invalidInput('permissions must be a non-empty list of grants', ['permissions']);
  }
  permissions.forEach((grant, i) => {
    if (!isPermissionGrant(grant)) {
      throw invalidInput('a grant looks like compute:<area>:<verb>, compute:<area>:* or compute:*', ['permissions', i]);
    }
  });
  return [...new Set(permissions as string[])];
}

/**
 * Creates an API credential bound to a tenant and returns its bearer token, which is shown this once: only its SHA-256
 * is stored. Bad input is INVALID_INPUT with `details.path`; an unknown tenant is NOT_FOUND.
 *
 * @example
 * ```ts
 * const { id, token } = await createCredential(tx, {
 *   tenantId: 'acme', name: 'ci', permissions: ['compute:workflows:*'], clock,
 * });
 * ```
 */
export async function createCredential(
  tx: SqlExecutor,
  input: CreateCredentialInput,
): Promise<{ id: string; token: string }> {
  if (typeof input !== 'object' || input === null) throw invalidInput('input must be an object', []);
  const { tenantId, name, expiresAt, clock } = input;
  if (typeof tenantId !== 'string' || tenantId.length === 0) throw invalidInput('tenantId is required', ['tenantId']);
  if (typeof name !== 'string' || name.trim().length === 0 || name.length > MAX_NAME_LENGTH) {
    throw invalidInput(`name must be 1 to ${MAX_NAME_LENGTH} characters`, ['name']);
  }
  assertStorableText(tenantId, ['tenantId']);
  assertStorableText(name, ['name']);
  const permissions = checkPermissions(input.permissions);
  if (typeof clock?.now !== 'function') throw invalidInput('a clock is required', ['clock']);
  const now = clock.now();
  if (expiresAt !== undefined) {
    if (!(expiresAt instanceof Date) || Number.isNaN(expiresAt.getTime())) {
      throw invalidInput('expiresAt must be a valid Date', ['expiresAt']);
    }
    if (expiresAt.getTime() <= now.getTime()) throw invalidInput('expiresAt must be in the future', ['expiresAt']);
  }
  const tenant = await tx.query('SELECT 1 FROM tenants WHERE id = $1', [tenantId]);
  if (tenant.rowCount === 0) throw new ComputeError('NOT_FOUND', 'no such tenant', { details: { path: ['tenantId'] } });

  const idPart = ulid(now.getTime());
  const id = `cred_${idPart}`;
  const token = `bc_${idPart}_${randomBytes(32).toString('base64url')}`;
  await tx.query(
    `INSERT INTO credentials (id, tenant_id, name, token_hash, permissions, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7)`,
    [id, tenantId, name, hashToken(token).toString('hex'), JSON.stringify(permissions), now, expiresAt ?? null],
  );
  return { id, token };
}

interface CredentialRow {
  id: string;
  tenant_id: string;
  token_hash: string;
  permissions: string[];
  expires_at: Date | null;
  revoked_at: Date | null;
}

/**
 * Turns a bearer token into the {@link Principal} it stands for. An unknown, malformed, revoked or expired token is
 * UNAUTHENTICATED, with the same message and no details whichever it was; the token itself is never echoed.
 *
 * @example
 * ```ts
 * const principal = await authenticate(sql, token, clock);
 * principal.permissions; // ['compute:workflows:*']
 * ```
 */
export async function authenticate(sql: SqlExecutor, token: unknown, clock: Clock): Promise<Principal> {
  if (typeof token !== 'string') throw unauthenticated();
  const match = TOKEN.exec(token);
  if (!match) throw unauthenticated();
  const hash = hashToken(token);
  const { rows } = await sql.query<CredentialRow>(
    'SELECT id, tenant_id, token_hash, permissions, expires_at, revoked_at FROM credentials WHERE token_hash = $1',
    [hash.toString('hex')],
  );
  const row = rows[0];
  if (!row) throw unauthenticated();
  // The lookup already matched the hash; comparing again in constant time keeps the decision itself off any
  // data-dependent path, and the id check refuses a row that does not belong to the token's id.
  const stored = Buffer.from(row.token_hash, 'hex');
  if (stored.length !== hash.length || !timingSafeEqual(stored, hash)) throw unauthenticated();
  if (row.id !== `cred_${match[1]}`) throw unauthenticated();
  if (row.revoked_at !== null) throw unauthenticated();
  if (row.expires_at !== null && row.expires_at.getTime() <= clock.now().getTime()) throw unauthenticated();
  const permissions = Array.isArray(row.permissions) ? row.permissions.filter((p) => typeof p === 'string') : [];
  return Object.freeze({
    credentialId: row.id,
    tenantId: row.tenant_id,
    permissions: Object.freeze(permissions),
  });
}

/**
 * Revokes a credential: its token is refused from now on. Revoking again keeps the first revocation time; an unknown
 * id is NOT_FOUND.
 *
 * @example
 * ```ts
 * await revokeCredential(tx, 'cred_01k…', clock);
 * ```
 */
export async function revokeCredential(tx: SqlExecutor, id: string, clock: Clock): Promise<{ revokedAt: Date }> {
  if (typeof id !== 'string' || id.length === 0) throw invalidInput('id is required', ['id']);
  const { rows } = await tx.query<{ revoked_at: Date }>(
    'UPDATE credentials SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 RETURNING revoked_at',
    [id, clock.now()],
  );
  const row = rows[0];
  if (!row) throw new ComputeError('NOT_FOUND', 'no such credential', { details: { path: ['id'] } });
  return { revokedAt: row.revoked_at };
}
