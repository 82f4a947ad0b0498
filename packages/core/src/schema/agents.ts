import { index, pgTable, text } from 'drizzle-orm/pg-core';
import { tstz } from './columns';
import { nodes } from './tenancy';

/** An agent's connection: who it is, which role it speaks as, and which boot it is. */
export const agentSessions = pgTable(
  'agent_sessions',
  {
    id: text('id').primaryKey(),
    nodeId: text('node_id')
      .notNull()
      .references(() => nodes.id),
    role: text('role').notNull(),
    bootId: text('boot_id').notNull(),
    connectedAt: tstz('connected_at').notNull(),
    lastSeenAt: tstz('last_seen_at').notNull(),
    closedAt: tstz('closed_at'),
  },
  (t) => [index('agent_sessions_node_idx').on(t.nodeId, t.connectedAt)],
);
