import { index, pgTable, text } from 'drizzle-orm/pg-core';
import { tstz } from './columns';

/** Secret values, sealed with AES-256-GCM under the configured key and bound to their id and tenant. */
export const pkiSecrets = pgTable(
  'pki_secrets',
  {
    id: text('id').primaryKey(),
    tenantId: text('tenant_id').notNull(),
    sealedValue: text('sealed_value').notNull(),
    createdAt: tstz('created_at').notNull(),
  },
  (t) => [index('pki_secrets_tenant_idx').on(t.tenantId)],
);
