import { pgTable, text } from 'drizzle-orm/pg-core';
import { tstz } from './columns';

/** The control-plane CA: its certificate, and its PKCS#8 key sealed with AES-256-GCM under the configured key. */
export const pkiCa = pgTable('pki_ca', {
  id: text('id').primaryKey(),
  algorithm: text('algorithm').notNull(),
  certificatePem: text('certificate_pem').notNull(),
  sealedKey: text('sealed_key').notNull(),
  notAfter: tstz('not_after').notNull(),
  createdAt: tstz('created_at').notNull(),
});
