import { boolean, index, pgTable, text } from 'drizzle-orm/pg-core';
import { tstz } from './columns';

/** Allowlisted image signers: a tenant's own (`tenant_id`), or public ones (`tenant_id` null or `public`). */
export const pkiImageSigners = pgTable(
  'pki_image_signers',
  {
    id: text('id').primaryKey(),
    tenantId: text('tenant_id'),
    public: boolean('public').notNull().default(false),
    name: text('name').notNull(),
    algorithm: text('algorithm').notNull(),
    publicKeyPem: text('public_key_pem').notNull(),
    createdAt: tstz('created_at').notNull(),
    revokedAt: tstz('revoked_at'),
  },
  (t) => [index('pki_image_signers_tenant_idx').on(t.tenantId)],
);
