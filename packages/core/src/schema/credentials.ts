import { index, jsonb, pgTable, text } from 'drizzle-orm/pg-core';
import { tstz } from './columns';
import { tenants } from './tenancy';

/** API credentials: a hashed bearer token bound to a tenant with a set of permissions. */
export const credentials = pgTable(
  'credentials',
  {
    id: text('id').primaryKey(),
    tenantId: text('tenant_id')
      .notNull()
      .references(() => tenants.id),
    name: text('name').notNull(),
    tokenHash: text('token_hash').notNull().unique(),
    permissions: jsonb('permissions').$type<string[]>().notNull(),
    createdAt: tstz('created_at').notNull(),
    expiresAt: tstz('expires_at'),
    revokedAt: tstz('revoked_at'),
  },
  (t) => [index('credentials_tenant_idx').on(t.tenantId)],
);
