import { createHash } from 'node:crypto';
import { createCredential, type SqlDatabase } from '@better-compute/core';
import { systemClock } from '@better-compute/core/kernel';

/** The name of the first-start credential of the tenant root. */
export const ROOT_ADMIN_NAME = 'root admin';
/** Every permission: the grant that matches every `compute:<area>:<verb>`. */
export const EVERY_PERMISSION = ['compute:*'] as const;

const LOCK = 'better-compute:root-admin';

/**
 * The first start's root admin credential. With `adminToken` (BETTER_COMPUTE_ADMIN_TOKEN) that token is made valid
 * with every permission for the tenant root (stored hashed, as core stores tokens) and nothing is shown. Without it, a
 * credential is created only when the tenant root has no unrevoked root admin yet, and its token is returned to be
 * printed this once. Under an advisory lock, so two processes starting at once create one.
 *
 * @example
 * ```ts
 * const { token } = await ensureRootAdmin(compute.database);
 * if (token) process.stdout.write(`admin token ${token}\n`);
 * ```
 */
export async function ensureRootAdmin(db: SqlDatabase, adminToken?: string): Promise<{ token?: string }> {
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [LOCK]);
    if (adminToken !== undefined) {
      const hash = createHash('sha256').update(adminToken, 'utf8').digest('hex');
      const idPart = adminToken.slice(3, 29);
      await tx.query(
        `INSERT INTO credentials (id, tenant_id, name, token_hash, permissions, created_at)
         VALUES ($1, 'root', $2, $3, $4::jsonb, $5) ON CONFLICT DO NOTHING`,
        [`cred_${idPart}`, ROOT_ADMIN_NAME, hash, JSON.stringify(EVERY_PERMISSION), systemClock.now()],
      );
      return {};
    }
    const { rowCount } = await tx.query(
      `SELECT 1 FROM credentials WHERE tenant_id = 'root' AND name = $1 AND revoked_at IS NULL LIMIT 1`,
      [ROOT_ADMIN_NAME],
    );
    if (rowCount > 0) return {};
    const { token } = await createCredential(tx, {
      tenantId: 'root',
      name: ROOT_ADMIN_NAME,
      permissions: [...EVERY_PERMISSION],
      clock: systemClock,
    });
    return { token };
  });
}
