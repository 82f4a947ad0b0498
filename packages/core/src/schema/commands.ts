import { sql } from 'drizzle-orm';
import { customType, index, jsonb, pgTable, text, unique } from 'drizzle-orm/pg-core';
import { tstz } from './columns';
import { nodes, tenants } from './tenancy';

const bytea = customType<{ data: Uint8Array }>({ dataType: () => 'bytea' });

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
    // 'failure': only a failed, rejected, expired or cancelled end queues the wake (null: any end does).
    wakeOn: text('wake_on'),
    // Held back from its agent until the command under this key on the same node has succeeded; cancelled with it.
    afterKey: text('after_key'),
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
    // A workflow step's commands, whatever agent they went to: what the engine's claim preloads for the step in flight.
    // The commands waiting for one (a sequence): found when that one ends.
    index('commands_after_idx').on(t.nodeId, t.afterKey).where(sql`after_key IS NOT NULL`),
    index('commands_workflow_step_idx').on(t.workflowId, t.stepId).where(sql`workflow_id IS NOT NULL`),
  ],
);
