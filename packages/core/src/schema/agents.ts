import { index, integer, pgTable, text } from 'drizzle-orm/pg-core';
import { tstz } from './columns';
import { nodes, sites } from './tenancy';

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

/**
 * A site's boot lease: the one site agent that answers PXE/DHCP there, through the session it took the lease with. It
 * is live while that session is connected; it moves to another connected site agent of the site only when that session
 * ends (closed, or stale), never back when the former holder returns. A lease whose session ended stays as a record of
 * its former holder until another site agent takes it.
 */
export const siteBootLeases = pgTable(
  'site_boot_leases',
  {
    siteId: text('site_id')
      .primaryKey()
      .references(() => sites.id),
    holderNodeId: text('holder_node_id')
      .notNull()
      .references(() => nodes.id),
    sessionId: text('session_id')
      .notNull()
      .references(() => agentSessions.id),
    acquiredAt: tstz('acquired_at').notNull(),
  },
  (t) => [index('site_boot_leases_session_idx').on(t.sessionId)],
);

/**
 * The work kinds queued, keyed by the node id, when an agent of a node opens a session (the modules'
 * `wakeOnAgentSession`), with the shard count their keys hash into. The kernel rewrites it at every start, so
 * `openAgentSession`, which has only its transaction, can queue them in that transaction.
 */
export const agentSessionWakes = pgTable('agent_session_wakes', {
  kind: text('kind').primaryKey(),
  shards: integer('shards').notNull(),
});
