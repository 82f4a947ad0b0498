import { sql } from 'drizzle-orm';
import { bigint, index, integer, jsonb, pgTable, primaryKey, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { tstz } from './columns';

// A node (or an instance) has at most one workflow in these states; `failed` is parked, not active.
const ACTIVE = sql`state IN ('pending', 'running', 'paused', 'failing', 'cancelling')`;

/** Workflows: one profile version expanded for one node or instance, with the document snapshotted. */
export const workflows = pgTable(
  'workflows',
  {
    id: text('id').primaryKey(),
    tenantId: text('tenant_id').notNull(),
    nodeId: text('node_id'),
    instanceId: text('instance_id'),
    // The `workflow` reconciler's key: the node id, or the workflow id for workflows without a node.
    key: text('key').notNull(),
    profileId: text('profile_id').notNull(),
    profileVersion: integer('profile_version').notNull(),
    // Where the profile was found: the tenant's own, another tenant's public one, or `builtin`.
    profileTenantId: text('profile_tenant_id').notNull(),
    document: jsonb('document').notNull(),
    state: text('state').notNull(),
    error: jsonb('error'),
    owner: text('owner'),
    commandKinds: jsonb('command_kinds').$type<string[]>().notNull(),
    batchId: text('batch_id'),
    cancelReason: text('cancel_reason'),
    createdAt: tstz('created_at').notNull(),
    updatedAt: tstz('updated_at').notNull(),
    startedAt: tstz('started_at'),
    finishedAt: tstz('finished_at'),
    // Bumped by every change to the workflow or its steps: the reconciler writes from what it last read only while
    // the revision it read is still current (see engine/commit-plan.ts).
    revision: bigint('revision', { mode: 'number' }).notNull().default(0),
  },
  (t) => [
    uniqueIndex('workflows_active_node_uq').on(t.nodeId).where(ACTIVE),
    uniqueIndex('workflows_active_instance_uq').on(t.instanceId).where(ACTIVE),
    index('workflows_key_idx').on(t.key, t.state),
    index('workflows_node_idx').on(t.tenantId, t.nodeId, t.createdAt),
    index('workflows_state_idx').on(t.state, t.updatedAt),
  ],
);

/** The persisted steps of a workflow, in the order they run (`position`). */
export const workflowSteps = pgTable(
  'workflow_steps',
  {
    workflowId: text('workflow_id')
      .notNull()
      .references(() => workflows.id, { onDelete: 'cascade' }),
    // main.3, main.3.on-failure, main.3.cleanup.1, cleanup.1
    stepId: text('step_id').notNull(),
    position: integer('position').notNull(),
    phase: text('phase').notNull(),
    // The main step an on-failure or a definition's cleanup step belongs to.
    parentStepId: text('parent_step_id'),
    // What the `use` resolved to: a registered step id, or the driver operation.
    action: text('action').notNull(),
    resolution: text('resolution').notNull(),
    runsOn: text('runs_on').notNull(),
    // The profile step as written (use, on, with, when, timeout, retries, onFailure, await, fallback, name).
    spec: jsonb('spec').notNull(),
    // Up to 30 days in milliseconds, past what an integer holds.
    timeoutMs: bigint('timeout_ms', { mode: 'number' }).notNull(),
    retries: integer('retries').notNull(),
    onFailure: text('on_failure').notNull(),
    awaitRejoin: text('await'),
    commandKind: text('command_kind'),
    state: text('state').notNull(),
    attempt: integer('attempt').notNull().default(0),
    // The attempt a run of the workflow started its retries from: `retries` counts attempts after it.
    attemptBase: integer('attempt_base').notNull().default(0),
    commandId: text('command_id'),
    deadline: tstz('deadline'),
    startedAt: tstz('started_at'),
    firstStartedAt: tstz('first_started_at'),
    finishedAt: tstz('finished_at'),
    result: jsonb('result'),
    error: jsonb('error'),
    // For await: 'rejoin': the agent's boot id and role when the command was sent.
    rejoin: jsonb('rejoin'),
    updatedAt: tstz('updated_at').notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.workflowId, t.stepId] }),
    index('workflow_steps_order_idx').on(t.workflowId, t.position),
    index('workflow_steps_action_idx').on(t.workflowId, t.action, t.state),
  ],
);
