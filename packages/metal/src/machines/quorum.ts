import {
  ComputeError,
  type ModuleContext,
  type QuorumBatch,
  type QuorumPort,
  type SqlExecutor,
  type StartWorkflowInput,
} from '@better-compute/core';

/** How long a workflow's batch may wait for its approvals: 24 hours, then the machine fails (`BATCH_EXPIRED`). */
export const BATCH_TTL_MS = 24 * 60 * 60 * 1000;

// The metal reconciler's work kind (reconciler.ts names it too; kept here so this file imports nothing of it).
const METAL_WORK = 'metal';

/** The batch a machine's workflow waits on, and where it stands; `metal.get` and `metal.list` show it. */
export interface MachineAwaiting {
  batchId: string;
  state: QuorumBatch['state'];
  approvals: number;
  threshold: number;
  approvedBy: string[];
  notAfter: string;
}

/**
 * The `batchFor` of a workflow metal starts on a machine, when approvers are configured (`ctx.quorum.enabled()`):
 * called by the engine with the kinds the workflow records, it creates a batch over the destructive ones, scoped to
 * the machine and its tenant and valid for {@link BATCH_TTL_MS}, and queues the metal reconciler for its expiry. The
 * engine then holds the workflow until metal resumes it. A workflow with no destructive kind gets no batch and starts
 * at once. Undefined when the quorum is off (or not installed).
 *
 * @example
 * ```ts
 * await ctx.workflows.start(tx, { tenantId, nodeId, profileId, owner: 'metal', batchFor: batchFor(tx, ctx, machine) });
 * ```
 */
export function batchFor(
  tx: SqlExecutor,
  ctx: Pick<ModuleContext, 'quorum' | 'commandKinds' | 'clock' | 'work'>,
  machine: { nodeId: string; tenantId: string },
): StartWorkflowInput['batchFor'] {
  const quorum = ctx.quorum;
  if (!quorum?.enabled()) return undefined;
  return async (kinds) => {
    const destructive = kinds.filter((kind) => ctx.commandKinds.get(kind)?.definition.destructive === true);
    if (destructive.length === 0) return undefined;
    const notAfter = new Date(ctx.clock.now().getTime() + BATCH_TTL_MS);
    const batch = await quorum.createBatch(tx, {
      tenantId: machine.tenantId,
      nodeIds: [machine.nodeId],
      commandKinds: destructive,
      notAfter,
    });
    // Nothing else would wake the machine if no approver ever answers.
    await ctx.work.enqueue(tx, { kind: METAL_WORK, key: machine.nodeId, notBefore: notAfter });
    return batch.id;
  };
}

/**
 * Whether a workflow is held for its batch: the engine started it `paused` with a batch (`batchFor`) and it has not
 * started since. An operator's pause comes only after a start, so it never reads as held.
 */
export const HELD_WORKFLOW_SQL = (alias: string) =>
  `(${alias}.state = 'paused' AND ${alias}.started_at IS NULL AND ${alias}.batch_id IS NOT NULL)`;

/**
 * The held workflow of a machine (see {@link HELD_WORKFLOW_SQL}) and its batch id, or undefined.
 *
 * @example
 * ```ts
 * const held = await readHeldWorkflow(tx, machine.workflowId);
 * ```
 */
export async function readHeldWorkflow(
  sql: SqlExecutor,
  workflowId: string,
): Promise<{ workflowId: string; batchId: string } | undefined> {
  const { rows } = await sql.query<{ id: string; batch_id: string }>(
    `SELECT w.id, w.batch_id FROM workflows w WHERE w.id = $1 AND ${HELD_WORKFLOW_SQL('w')}`,
    [workflowId],
  );
  return rows[0] ? { workflowId: rows[0].id, batchId: rows[0].batch_id } : undefined;
}

/**
 * What a machine waits on, from its held workflow's batch through the quorum port; without the port the batch reads
 * as pending with no approvals (nothing can approve it).
 *
 * @example
 * ```ts
 * const awaiting = await awaitingOf(sql, ctx.quorum, 'bat_01k…');
 * ```
 */
export async function awaitingOf(
  sql: SqlExecutor,
  quorum: QuorumPort | undefined,
  batchId: string,
): Promise<MachineAwaiting> {
  const batch = await quorum?.getBatch(sql, batchId);
  if (!batch) {
    return { batchId, state: 'pending', approvals: 0, threshold: 0, approvedBy: [], notAfter: '' };
  }
  return {
    batchId,
    state: batch.state,
    approvals: batch.approvals,
    threshold: batch.threshold,
    approvedBy: batch.approvedBy,
    notAfter: batch.notAfter.toISOString(),
  };
}

/**
 * The quorum port, or INVALID_CONFIG when it is not installed (the `batches` methods that change a batch need it).
 *
 * @example
 * ```ts
 * const quorum = requireQuorum(ctx);
 * ```
 */
export function requireQuorum(ctx: Pick<ModuleContext, 'quorum'>): QuorumPort {
  if (!ctx.quorum) {
    throw new ComputeError(
      'INVALID_CONFIG',
      'batches need ctx.quorum: install pki and pass quorum: security.quorum()',
      {
        details: { path: ['quorum'] },
      },
    );
  }
  return ctx.quorum;
}
