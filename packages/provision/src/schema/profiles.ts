import { boolean, integer, jsonb, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';
import { tstz } from './columns';

/**
 * Profiles stored per tenant. A version is immutable once a workflow used it (`used_at` set). Shipped profiles live in
 * code and are listed under the tenant `builtin`; they have no rows here.
 */
export const profiles = pgTable(
  'profiles',
  {
    tenantId: text('tenant_id').notNull(),
    id: text('id').notNull(),
    version: integer('version').notNull(),
    // A public profile is visible to every tenant, after the tenant's own and before a shipped one.
    public: boolean('public').notNull().default(false),
    document: jsonb('document').notNull(),
    usedAt: tstz('used_at'),
    createdAt: tstz('created_at').notNull(),
    updatedAt: tstz('updated_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.tenantId, t.id, t.version] })],
);
