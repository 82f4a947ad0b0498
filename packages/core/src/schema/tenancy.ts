import { sql } from 'drizzle-orm';
import { bigint, index, jsonb, pgTable, text } from 'drizzle-orm/pg-core';
import { tstz } from './columns';

/** Tenants. `root` always exists and may act on every tenant. */
export const tenants = pgTable('tenants', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  createdAt: tstz('created_at').notNull(),
});

/** Sites: a room of machines served by one or more site agents. */
export const sites = pgTable(
  'sites',
  {
    id: text('id').primaryKey(),
    tenantId: text('tenant_id')
      .notNull()
      .references(() => tenants.id),
    name: text('name').notNull(),
    createdAt: tstz('created_at').notNull(),
  },
  (t) => [index('sites_tenant_idx').on(t.tenantId)],
);

/** Every agent is a node: machines (`kind: 'machine'`) and site agents (`kind: 'site-agent'`). */
export const nodes = pgTable(
  'nodes',
  {
    id: text('id').primaryKey(),
    tenantId: text('tenant_id')
      .notNull()
      .references(() => tenants.id),
    siteId: text('site_id').references(() => sites.id),
    poolId: text('pool_id'),
    kind: text('kind').notNull(),
    name: text('name'),
    // The lifecycle state a provisioning module keeps (metal: enrolling, available, deployed, …); null for site agents.
    provisionState: text('provision_state'),
    labels: jsonb('labels').$type<Record<string, string>>().notNull().default(sql`'{}'::jsonb`),
    // What was learned about the node (metal: its hardware inventory); a JSON object, `{}` until something is known.
    facts: jsonb('facts').$type<Record<string, unknown>>().notNull().default(sql`'{}'::jsonb`),
    spec: jsonb('spec').$type<Record<string, unknown>>().notNull().default(sql`'{}'::jsonb`),
    generation: bigint('generation', { mode: 'number' }).notNull().default(1),
    observedGeneration: bigint('observed_generation', { mode: 'number' }).notNull().default(0),
    createdAt: tstz('created_at').notNull(),
    updatedAt: tstz('updated_at').notNull(),
  },
  (t) => [index('nodes_tenant_idx').on(t.tenantId), index('nodes_site_idx').on(t.siteId, t.kind)],
);
