import { integer, jsonb, pgTable, text } from 'drizzle-orm/pg-core';
import { tstz } from './columns';

/** Join tokens. Only the SHA-256 of the token's secret part is stored. */
export const pkiJoinTokens = pgTable('pki_join_tokens', {
  id: text('id').primaryKey(),
  tenantId: text('tenant_id').notNull(),
  role: text('role').notNull(),
  poolId: text('pool_id'),
  siteId: text('site_id'),
  // The node a `node`, `site` or `provisioned` join binds to, when the issuer named it.
  nodeId: text('node_id'),
  secretHash: text('secret_hash').notNull(),
  expect: jsonb('expect').$type<Record<string, string>>(),
  maxUses: integer('max_uses'),
  uses: integer('uses').notNull().default(0),
  expiresAt: tstz('expires_at').notNull(),
  revokedAt: tstz('revoked_at'),
  lastUsedAt: tstz('last_used_at'),
  createdAt: tstz('created_at').notNull(),
});
