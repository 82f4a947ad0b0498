import { boolean, index, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { tstz } from './columns';

/** The image catalog: images registered by digest in a tenant (or public), verified against allowlisted signers. */
export const images = pgTable(
  'images',
  {
    id: text('id').primaryKey(),
    tenantId: text('tenant_id').notNull(),
    name: text('name').notNull(),
    version: text('version').notNull(),
    // `sha256:<hex>` of the image.
    digest: text('digest').notNull(),
    // Where the image can be fetched (an http(s) URL or another scheme an ImageSource resolves).
    url: text('url'),
    public: boolean('public').notNull().default(false),
    signerId: text('signer_id').notNull(),
    signature: text('signature').notNull(),
    createdAt: tstz('created_at').notNull(),
  },
  (t) => [
    uniqueIndex('images_tenant_name_version_uq').on(t.tenantId, t.name, t.version),
    index('images_name_version_idx').on(t.name, t.version),
  ],
);
