import { index, pgTable, text } from 'drizzle-orm/pg-core';
import { tstz } from './columns';

/** Every agent certificate the CA issued, by serial (lower-case hex); revocation is a timestamp here. */
export const pkiCertificates = pgTable(
  'pki_certificates',
  {
    serial: text('serial').primaryKey(),
    nodeId: text('node_id').notNull(),
    tenantId: text('tenant_id').notNull(),
    siteId: text('site_id'),
    role: text('role').notNull(),
    joinTokenId: text('join_token_id'),
    certificatePem: text('certificate_pem').notNull(),
    notBefore: tstz('not_before').notNull(),
    notAfter: tstz('not_after').notNull(),
    revokedAt: tstz('revoked_at'),
    revokedReason: text('revoked_reason'),
    createdAt: tstz('created_at').notNull(),
  },
  (t) => [index('pki_certificates_node_idx').on(t.nodeId, t.notAfter)],
);
