import { sql } from 'drizzle-orm';
import {
  bigint,
  bigserial,
  customType,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  unique,
} from 'drizzle-orm/pg-core';
import { tstz, xid8 } from './columns';
import { nodes, tenants } from './tenancy';

const bytea = customType<{ data: Uint8Array }>({ dataType: () => 'bytea' });

/** The work queue: one row per (kind, key), due at `not_before`, owned by the worker holding its shard. */
export const workItems = pgTable(
  'work_items',
  {
    kind: text('kind').notNull(),
    key: text('key').notNull(),
    shard: integer('shard').notNull(),
    notBefore: tstz('not_before').notNull(),
    // Bumped by every enqueue, so finishing an item never deletes a wake-up that arrived while it ran.
    seq: bigint('seq', { mode: 'number' }).notNull().default(0),
    attempts: integer('attempts').notNull().default(0),
    lastError: text('last_error'),
    claimedBy: text('claimed_by'),
    createdAt: tstz('created_at').notNull(),
    updatedAt: tstz('updated_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.kind, t.key] }), index('work_items_due_idx').on(t.shard, t.notBefore)],
);

/** Shard leases: which worker owns a shard, until when, under which fencing epoch. */
export const shardLeases = pgTable('shard_leases', {
  shard: integer('shard').primaryKey(),
  workerId: text('worker_id'),
  epoch: bigint('epoch', { mode: 'number' }).notNull().default(0),
  expiresAt: tstz('expires_at').notNull(),
});

/** Live workers, by heartbeat; the set the shards are balanced over. */
export const workers = pgTable('workers', {
  id: text('id').primaryKey(),
  startedAt: tstz('started_at').notNull(),
  heartbeatAt: tstz('heartbeat_at').notNull(),
  stoppedAt: tstz('stopped_at'),
});

/** Commands to agents. `key` is unique per node: enqueueing is find-before-create. */
export const commands = pgTable(
  'commands',
  {
    id: text('id').primaryKey(),
    tenantId: text('tenant_id')
      .notNull()
      .references(() => tenants.id),
    nodeId: text('node_id')
      .notNull()
      .references(() => nodes.id),
    kind: text('kind').notNull(),
    payload: jsonb('payload').notNull(),
    key: text('key').notNull(),
    state: text('state').notNull(),
    notAfter: tstz('not_after').notNull(),
    batchId: text('batch_id'),
    workflowId: text('workflow_id'),
    stepId: text('step_id'),
    targetNodeId: text('target_node_id'),
    // A work item queued in the transaction that settles the command, so its waiter reacts at once.
    wakeKind: text('wake_kind'),
    wakeKey: text('wake_key'),
    result: bytea('result'),
    attested: jsonb('attested'),
    reason: text('reason'),
    createdAt: tstz('created_at').notNull(),
    updatedAt: tstz('updated_at').notNull(),
    dispatchedAt: tstz('dispatched_at'),
    finishedAt: tstz('finished_at'),
  },
  (t) => [
    unique('commands_node_key_uq').on(t.nodeId, t.key),
    index('commands_node_state_idx').on(t.nodeId, t.state),
    index('commands_open_idx').on(t.notAfter).where(sql`state IN ('pending', 'dispatched', 'acked', 'running')`),
  ],
);

/** The events outbox: written in the transaction of the change, read in commit-safe order by `(tx_id, seq)`. */
export const events = pgTable(
  'events',
  {
    seq: bigserial('seq', { mode: 'number' }).primaryKey(),
    txId: xid8('tx_id').notNull().default(sql`pg_current_xact_id()`),
    id: text('id').notNull().unique(),
    tenantId: text('tenant_id').notNull(),
    subject: text('subject').notNull(),
    type: text('type').notNull(),
    data: jsonb('data').notNull(),
    at: tstz('at').notNull(),
  },
  (t) => [index('events_tenant_cursor_idx').on(t.tenantId, t.txId, t.seq)],
);
