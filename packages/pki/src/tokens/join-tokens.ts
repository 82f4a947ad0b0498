import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import {
  type Clock,
  ComputeError,
  type HardwareExpectation,
  type IssueJoinTokenInput,
  type JoinRole,
  newId,
  type SecretRef,
  type SqlExecutor,
} from '@better-compute/core';
import type { CommitChange, StagedWrite } from '@better-compute/core/kernel';
import { getNode } from '@better-compute/core/nodes';
import { sealSecret } from '../secrets/secret-broker';
import { parseExpectation } from './claims';
import { optionalString, requireInt, requireObject, requireString } from './validate';

/** The join roles. */
export const JOIN_ROLES: readonly JoinRole[] = ['node', 'site', 'provisioned', 'discovery'];

/** The longest a join token may live: 30 days. */
export const MAX_TOKEN_TTL_SECONDS = 30 * 24 * 3600;

/** {@link IssueJoinTokenInput} plus the node a `node`, `site` or `provisioned` join binds to. */
export interface JoinTokenInput extends IssueJoinTokenInput {
  nodeId?: string;
}

/** A stored join token (never its secret). */
export interface JoinTokenRow {
  id: string;
  tenant_id: string;
  role: JoinRole;
  pool_id: string | null;
  site_id: string | null;
  node_id: string | null;
  secret_hash: string;
  expect: HardwareExpectation | null;
  max_uses: number | null;
  uses: number;
  expires_at: Date;
  revoked_at: Date | null;
}

const TOKEN = /^(tok_[0-9a-hjkmnp-tv-z]{26})\.([A-Za-z0-9_-]{43})$/;

function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

// A token's row from its eleven values (placeholders, in the order of `PreparedJoinToken.row`), and the condition
// that its tenant, and the site and node it names in that tenant, exist: one text for every statement that inserts one.
const tokenValuesSql = (p: readonly string[]) =>
  `${p[0]}::text, ${p[1]}::text, ${p[2]}::text, ${p[3]}::text, ${p[4]}::text, ${p[5]}::text, ${p[6]}::text,
    ${p[7]}::jsonb, ${p[8]}::int, 0, ${p[9]}::timestamptz, ${p[10]}::timestamptz`;
const tokenPlaceSql = (tenant: string, site: string, node: string) =>
  `EXISTS (SELECT 1 FROM tenants WHERE id = ${tenant})
    AND (${site}::text IS NULL OR EXISTS (SELECT 1 FROM sites WHERE id = ${site} AND tenant_id = ${tenant}))
    AND (${node}::text IS NULL OR EXISTS (SELECT 1 FROM nodes WHERE id = ${node} AND tenant_id = ${tenant}))`;
const INSERT_TOKEN_INTO = `INSERT INTO pki_join_tokens (id, tenant_id, role, pool_id, site_id, node_id, secret_hash,
    expect, max_uses, uses, expires_at, created_at)`;
// The secret holding a token's value, inserted only with the token (`FROM token`, the token insert's CTE).
const insertSecretSql = (token: string, ref: string, tenant: string, sealed: string, at: string) =>
  `INSERT INTO pki_secrets (id, tenant_id, sealed_value, created_at)
    SELECT ${ref}::text, ${tenant}::text, ${sealed}::text, ${at}::timestamptz FROM ${token}`;

const POSITIONAL = Array.from({ length: 11 }, (_, i) => `$${i + 1}`);
const INSERT_TOKEN = `${INSERT_TOKEN_INTO} SELECT ${tokenValuesSql(POSITIONAL)} WHERE ${tokenPlaceSql('$2', '$5', '$6')}`;

/** NOT_FOUND naming what a token would name that does not exist (its tenant, its site, its node, in that order). */
async function checkTokenPlace(
  tx: SqlExecutor,
  tenantId: string,
  siteId: string | undefined,
  nodeId: string | undefined,
): Promise<void> {
  const tenant = await tx.query('SELECT 1 FROM tenants WHERE id = $1', [tenantId]);
  if (tenant.rowCount === 0) throw new ComputeError('NOT_FOUND', 'no such tenant', { details: { path: ['tenantId'] } });
  if (siteId) {
    const site = await tx.query('SELECT 1 FROM sites WHERE id = $1 AND tenant_id = $2', [siteId, tenantId]);
    if (site.rowCount === 0) throw new ComputeError('NOT_FOUND', 'no such site', { details: { path: ['siteId'] } });
  }
  if (nodeId) {
    const node = await getNode(tx, nodeId, { tenantId });
    if (!node) throw new ComputeError('NOT_FOUND', 'no such node', { details: { path: ['nodeId'] } });
  }
}

/** A checked join token, ready to insert: its row's parameters (as {@link INSERT_TOKEN} takes them) and its value. */
interface PreparedJoinToken {
  id: string;
  token: string;
  row: unknown[];
  tenantId: string;
  siteId: string | undefined;
  nodeId: string | undefined;
}

function prepareJoinToken(input: JoinTokenInput, now: Date): PreparedJoinToken {
  const object = requireObject(input, []);
  const tenantId = requireString(object.tenantId, ['tenantId']);
  const role = object.role as JoinRole;
  if (!JOIN_ROLES.includes(role)) {
    throw new ComputeError('INVALID_INPUT', `role must be one of ${JOIN_ROLES.join(', ')}`, {
      details: { path: ['role'] },
    });
  }
  const ttlSeconds = requireInt(object.ttlSeconds, ['ttlSeconds'], 1, MAX_TOKEN_TTL_SECONDS);
  const maxUses =
    object.maxUses === undefined || object.maxUses === null
      ? null
      : requireInt(object.maxUses, ['maxUses'], 1, 1_000_000);
  const poolId = optionalString(object.poolId, ['poolId']);
  const siteId = optionalString(object.siteId, ['siteId']);
  const nodeId = optionalString(object.nodeId, ['nodeId']);
  const expect = parseExpectation(object.expect);
  if (role === 'site' && !siteId && !nodeId) {
    throw new ComputeError('INVALID_INPUT', 'a site token names its site', { details: { path: ['siteId'] } });
  }
  if (role === 'node' && !nodeId) {
    throw new ComputeError('INVALID_INPUT', 'a node token names the node it binds', { details: { path: ['nodeId'] } });
  }
  const id = newId('tok');
  const secret = randomBytes(32).toString('base64url');
  const row = [
    id,
    tenantId,
    role,
    poolId ?? null,
    siteId ?? null,
    nodeId ?? null,
    hashSecret(secret),
    expect ? JSON.stringify(expect) : null,
    maxUses,
    new Date(now.getTime() + ttlSeconds * 1000),
    now,
  ];
  return { id, token: `${id}.${secret}`, row, tenantId, siteId, nodeId };
}

/**
 * Mints a join token: `<id>.<secret>`, where the id (`tok_…`) finds the row and only the SHA-256 of the 256-bit
 * secret is stored. `maxUses` left out means any number of joins until `ttlSeconds` (1 s to 30 days) pass. `site`
 * tokens need `siteId`; `node` tokens need `nodeId`, the pre-registered node they bind. Bad input is INVALID_INPUT
 * with `details.path`; an unknown tenant, site or node is NOT_FOUND.
 *
 * @example
 * ```ts
 * const { id, token } = await issueJoinToken(tx, { tenantId: 'root', role: 'discovery', siteId, ttlSeconds: 3600 }, { clock });
 * ```
 */
export async function issueJoinToken(
  tx: SqlExecutor,
  input: JoinTokenInput,
  deps: { clock: Clock },
): Promise<{ id: string; token: string }> {
  const prepared = prepareJoinToken(input, deps.clock.now());
  await insertToken(tx, prepared, INSERT_TOKEN, prepared.row);
  return { id: prepared.id, token: prepared.token };
}

/**
 * One statement that inserts only when the tenant, and the site and node the token names in that tenant, exist (and
 * whatever `checkMore` checks); when it inserted nothing, the checks say which was missing, then the statement runs
 * once more (a tenant, site or node created meanwhile).
 */
async function insertToken(
  tx: SqlExecutor,
  prepared: PreparedJoinToken,
  text: string,
  params: readonly unknown[],
  checkMore?: () => Promise<void>,
): Promise<void> {
  if ((await tx.query(text, params)).rowCount !== 0) return;
  await checkTokenPlace(tx, prepared.tenantId, prepared.siteId, prepared.nodeId);
  await checkMore?.();
  if ((await tx.query(text, params)).rowCount === 0) {
    throw new ComputeError('NOT_FOUND', 'no such tenant, site or node', { details: { path: ['tenantId'] } });
  }
}

// The token's row and the secret holding its value, both or neither: the token goes in only where the secret's
// tenant exists too, and the secret only with the token.
const INSERT_TOKEN_SECRET = `WITH token AS (${INSERT_TOKEN} AND EXISTS (SELECT 1 FROM tenants WHERE id = $12) RETURNING id)
  ${insertSecretSql('token', '$13', '$12', '$14', '$11')} RETURNING id`;

/**
 * Mints a join token as {@link issueJoinToken} does and stores its value with the secret broker, in `secretTenantId`,
 * by one statement: only the secret's reference leaves, so the token never passes through the caller (a boot entry
 * carries the reference; its site agent fetches the value through the command). An unknown `secretTenantId` is
 * NOT_FOUND (`details.path: ['secretTenantId']`), and then neither is written.
 *
 * @example
 * ```ts
 * const { id, ref } = await issueJoinTokenSecret(tx, { tenantId, role: 'node', nodeId, ttlSeconds: 3600, secretTenantId }, { clock, key });
 * ```
 */
export async function issueJoinTokenSecret(
  tx: SqlExecutor,
  input: JoinTokenInput & { secretTenantId: string },
  deps: { clock: Clock; key: Uint8Array },
): Promise<{ id: string; ref: SecretRef }> {
  const { id, ref, write } = stageJoinTokenSecret(input, deps);
  await write.write(tx);
  return { id, ref };
}

/**
 * The token's insert (`join_token`) for a caller's commit, requiring that the tenant, and the site and node the token
 * names in it, exist (and whatever `alsoRequires` adds).
 */
function tokenInsertChange(
  prepared: PreparedJoinToken,
  alsoRequires?: (bind: (value: unknown) => string) => string,
): CommitChange {
  const [, tenantId, , , siteId, nodeId] = prepared.row;
  return {
    name: 'join_token',
    sql: ({ bind, guard }) =>
      `${INSERT_TOKEN_INTO} SELECT ${tokenValuesSql(prepared.row.map((value) => bind(value)))} WHERE ${guard} RETURNING id`,
    requires: ({ bind }) => {
      const place = tokenPlaceSql(bind(tenantId), bind(siteId), bind(nodeId));
      return alsoRequires ? `${place} AND ${alsoRequires(bind)}` : place;
    },
  };
}

/**
 * A join token as {@link issueJoinToken} mints it, checked and prepared without the database: its value for the caller
 * (to render into a document), and `write.changes`, the token's insert (`join_token`) for the caller's own commit,
 * requiring that the tenant, and the site and node the token names in it, exist (else the commit writes nothing);
 * `write.write(tx)` is {@link issueJoinToken}'s statement, with its NOT_FOUND. Bad input throws at once (INVALID_INPUT).
 *
 * @example
 * ```ts
 * const { id, token, write } = stageJoinToken({ tenantId, role: 'provisioned', nodeId, ttlSeconds: 7200 }, { clock });
 * await commit(ctx, { changes: [gate, ...write.changes] });
 * ```
 */
export function stageJoinToken(
  input: JoinTokenInput,
  deps: { clock: Clock },
): { id: string; token: string; write: StagedWrite } {
  const prepared = prepareJoinToken(input, deps.clock.now());
  const changes: CommitChange[] = [tokenInsertChange(prepared)];
  const write = (tx: SqlExecutor) => insertToken(tx, prepared, INSERT_TOKEN, prepared.row);
  return { id: prepared.id, token: prepared.token, write: { changes, write } };
}

/**
 * The token and secret of {@link issueJoinTokenSecret}, checked and prepared without the database, for the caller's
 * own commit: `write.changes` are the token's insert (`join_token`) and the secret's (`join_token_secret`, written by
 * the same guard, so both or neither; neither names the other, so one commit can carry several tokens), requiring that the tenant, and the site and node the token names in it, and the secret's tenant exist
 * (else the caller's commit writes nothing); `write.write(tx)` is {@link issueJoinTokenSecret}'s statement, with its
 * NOT_FOUND. Bad input throws at once (INVALID_INPUT), as minting does.
 *
 * @example
 * ```ts
 * const { ref, write } = stageJoinTokenSecret({ tenantId, role: 'node', nodeId, ttlSeconds: 3600, secretTenantId }, { clock, key });
 * await commit(ctx, { changes: [gate, ...write.changes] });
 * ```
 */
export function stageJoinTokenSecret(
  input: JoinTokenInput & { secretTenantId: string },
  deps: { clock: Clock; key: Uint8Array },
): { id: string; ref: SecretRef; write: StagedWrite } {
  const prepared = prepareJoinToken(input, deps.clock.now());
  const secretTenantId = requireString(input.secretTenantId, ['secretTenantId']);
  const ref = newId('sec');
  const sealed = sealSecret(deps.key, ref, secretTenantId, prepared.token);
  const params = [...prepared.row, secretTenantId, ref, sealed];
  const now = prepared.row[10];
  const changes: CommitChange[] = [
    tokenInsertChange(prepared, (bind) => `EXISTS (SELECT 1 FROM tenants WHERE id = ${bind(secretTenantId)})`),
    {
      // Guarded as the token's insert is, not read from it: the two refer to no other change by name, so a commit can
      // carry several tokens (a boot entry per MAC, sent together), numbered apart by the commit.
      name: 'join_token_secret',
      sql: ({ bind, guard }) =>
        `INSERT INTO pki_secrets (id, tenant_id, sealed_value, created_at)
         SELECT ${bind(ref)}::text, ${bind(secretTenantId)}::text, ${bind(sealed)}::text, ${bind(now)}::timestamptz
         WHERE ${guard}`,
    },
  ];
  const write = async (tx: SqlExecutor) =>
    insertToken(tx, prepared, INSERT_TOKEN_SECRET, params, async () => {
      const tenant = await tx.query('SELECT 1 FROM tenants WHERE id = $1', [secretTenantId]);
      if (tenant.rowCount === 0) {
        throw new ComputeError('NOT_FOUND', 'no such tenant', { details: { path: ['secretTenantId'] } });
      }
    });
  return { id: prepared.id, ref, write: { changes, write } };
}

/**
 * Revokes a join token; later joins with it are refused (`token-revoked`). An unknown id is NOT_FOUND.
 *
 * @example
 * ```ts
 * await revokeJoinToken(tx, 'tok_01k…', { clock });
 * ```
 */
export async function revokeJoinToken(tx: SqlExecutor, id: string, deps: { clock: Clock }): Promise<void> {
  const { rowCount } = await tx.query(
    'UPDATE pki_join_tokens SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1',
    [id, deps.clock.now()],
  );
  if (rowCount === 0) throw new ComputeError('NOT_FOUND', 'no such join token', { details: { path: ['id'] } });
}

/** A join refusal: UNAUTHENTICATED for a token that is not (or no longer) a credential. */
export function tokenRefusal(
  reason: 'token-unknown' | 'token-expired' | 'token-exhausted' | 'token-revoked',
): ComputeError {
  const messages = {
    'token-unknown': 'the join token is not valid',
    'token-expired': 'the join token has expired',
    'token-exhausted': 'the join token has no uses left',
    'token-revoked': 'the join token has been revoked',
  } as const;
  return new ComputeError('UNAUTHENTICATED', messages[reason], { details: { path: ['token'], reason } });
}

/**
 * Finds the token a presented join token names and checks its secret in constant time. Malformed, unknown or wrong
 * secrets are all `token-unknown`, so a caller learns nothing about which ids exist.
 *
 * @example
 * ```ts
 * const row = await lookupJoinToken(tx, presented);
 * ```
 */
export async function lookupJoinToken(sql: SqlExecutor, presented: unknown): Promise<JoinTokenRow> {
  const match = typeof presented === 'string' ? TOKEN.exec(presented) : null;
  const id = match?.[1] ?? '';
  const { rows } = await sql.query<JoinTokenRow>('SELECT * FROM pki_join_tokens WHERE id = $1', [id]);
  const row = rows[0];
  // Hash even when there is no row, so a miss takes as long as a wrong secret.
  const offered = Buffer.from(hashSecret(match?.[2] ?? ''), 'hex');
  const stored = Buffer.from(row?.secret_hash ?? '0'.repeat(64), 'hex');
  if (!row || !match || !timingSafeEqual(offered, stored)) throw tokenRefusal('token-unknown');
  return row;
}

/** Why a found token cannot be used at `now`, if it cannot. */
export function tokenUnusable(row: JoinTokenRow, now: Date): ComputeError | undefined {
  if (row.revoked_at) return tokenRefusal('token-revoked');
  if (now >= row.expires_at) return tokenRefusal('token-expired');
  if (row.max_uses !== null && row.uses >= row.max_uses) return tokenRefusal('token-exhausted');
  return undefined;
}

/**
 * Spends one use atomically: a conditional UPDATE, so of many concurrent joins only as many as there are uses left
 * succeed. Returns the refusal when none is left (re-read for the reason).
 */
export async function spendJoinToken(tx: SqlExecutor, id: string, now: Date): Promise<void> {
  const { rowCount } = await tx.query(
    `UPDATE pki_join_tokens SET uses = uses + 1, last_used_at = $2
     WHERE id = $1 AND revoked_at IS NULL AND expires_at > $2 AND (max_uses IS NULL OR uses < max_uses)`,
    [id, now],
  );
  if (rowCount === 1) return;
  const { rows } = await tx.query<JoinTokenRow>('SELECT * FROM pki_join_tokens WHERE id = $1', [id]);
  throw (rows[0] && tokenUnusable(rows[0], now)) ?? tokenRefusal('token-unknown');
}
