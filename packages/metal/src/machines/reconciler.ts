import {
  isComputeError,
  type ModuleContext,
  type ReconcileResult,
  type Reconciler,
  type SqlExecutor,
} from '@better-compute/core';
import { decideRequest, decideWorkflowEnd } from '../lifecycle/decide';
import type { PhaseState } from '../lifecycle/states';
import { applyMove, type PhaseProfiles } from './apply-move';
import { type MachineError, type MachineRecord, readMachine, snapshotOf } from './machine-rows';
import { readHeldWorkflow } from './quorum';

/**
 * The work kind of metal's reconciler, keyed by node id: every workflow metal starts names it as its `owner`, and
 * the engine queues it under the workflow's key (the node id) when the workflow ends.
 *
 * @example
 * ```ts
 * await ctx.work.enqueue(tx, { kind: METAL_WORK_KIND, key: nodeId });
 * ```
 */
export const METAL_WORK_KIND = 'metal';

type Outcome = 'succeeded' | 'failed' | 'cancelled';

// What starting the next phase's workflow refuses for good: a profile that is missing or does not resolve, a port
// that is not installed, another workflow already active on the node.
const UNSTARTABLE = new Set(['NOT_FOUND', 'INVALID_INPUT', 'INVALID_CONFIG', 'CONFLICT']);

interface WorkflowEnd {
  outcome: Outcome;
  error: { code?: unknown; message?: unknown; stepId?: unknown } | null;
  cancelReason: string | null;
}

async function readWorkflowEnd(tx: SqlExecutor, workflowId: string): Promise<WorkflowEnd | undefined> {
  const { rows } = await tx.query<{ state: string; error: WorkflowEnd['error']; cancel_reason: string | null }>(
    'SELECT state, error, cancel_reason FROM workflows WHERE id = $1',
    [workflowId],
  );
  const row = rows[0];
  // A workflow that is gone ended as far as metal can tell: nothing will ever end it again.
  if (!row)
    return { outcome: 'failed', error: { code: 'INTERNAL', message: 'the workflow is gone' }, cancelReason: null };
  if (row.state !== 'succeeded' && row.state !== 'failed' && row.state !== 'cancelled') return undefined;
  return { outcome: row.state, error: row.error, cancelReason: row.cancel_reason };
}

/** The error a failed or cancelled workflow leaves on its machine. */
function errorOf(machine: MachineRecord, workflowId: string, end: WorkflowEnd): MachineError {
  const phase = machine.phase;
  if (end.outcome === 'cancelled') {
    return { code: 'CANCELLED', message: `workflow cancelled: ${end.cancelReason ?? 'aborted'}`, workflowId, phase };
  }
  return {
    code: typeof end.error?.code === 'string' ? end.error.code : 'INTERNAL',
    message: typeof end.error?.message === 'string' ? end.error.message : 'the workflow failed',
    ...(typeof end.error?.stepId === 'string' ? { stepId: end.error.stepId } : {}),
    workflowId,
    phase,
  };
}

/**
 * Settles a machine whose workflow is held for its batch: resumed when the batch is approved (event
 * `metal.batch.approved`); aborted and the machine failed in its phase when the batch is rejected, expired or gone
 * (without the quorum port, it waits: nothing can approve it). A pending batch brings the reconciler back at expiry.
 */
async function settleBatch(
  tx: SqlExecutor,
  ctx: ModuleContext,
  profiles: PhaseProfiles,
  machine: MachineRecord,
  held: { workflowId: string; batchId: string },
): Promise<ReconcileResult | undefined> {
  if (!ctx.quorum || !ctx.workflows) return;
  const batch = await ctx.quorum.getBatch(tx, held.batchId);
  const now = ctx.clock.now();
  if (batch?.state === 'pending') {
    return { requeueAfterMs: Math.max(1, batch.notAfter.getTime() - now.getTime()) };
  }
  if (batch?.state === 'approved') {
    await ctx.workflows.resume(tx, { workflowId: held.workflowId });
    await ctx.events.publish(tx, {
      tenantId: machine.tenantId,
      subject: `node/${machine.nodeId}`,
      type: 'metal.batch.approved',
      data: {
        nodeId: machine.nodeId,
        batchId: held.batchId,
        workflowId: held.workflowId,
        approvedBy: batch.approvedBy,
      },
    });
    return;
  }
  const lastError: MachineError =
    batch?.state === 'rejected'
      ? {
          code: 'BATCH_REJECTED',
          message: `batch ${held.batchId} rejected by ${batch.rejection?.by ?? 'an operator'}: ${batch.rejection?.reason ?? ''}`,
          workflowId: held.workflowId,
          phase: machine.phase,
        }
      : {
          code: 'BATCH_EXPIRED',
          message: batch
            ? `batch ${held.batchId} expired with ${batch.approvals} of ${batch.threshold} approvals`
            : `batch ${held.batchId} is gone`,
          workflowId: held.workflowId,
          phase: machine.phase,
        };
  await ctx.workflows.abort(tx, { workflowId: held.workflowId, reason: lastError.message.slice(0, 1024) });
  await applyMove(tx, ctx, profiles, machine, decideRequest(snapshotOf(machine), 'abort'), { lastError });
  return;
}

/**
 * The `metal` reconciler: reads the machine (locked) and the workflow it recorded, and when that workflow has ended
 * decides with `decideWorkflowEnd` and carries the move out in the same transaction (success: the next state, or the
 * next phase of an enroll, or a hold; failure or cancellation: `failed` with the workflow's error in `last_error`). A
 * machine whose workflow still runs, or that an abort already moved, is left alone. When the next phase's workflow
 * cannot start (its profile is missing or does not resolve, another workflow is active) the machine fails in that
 * phase with the refusal as its error, rather than retrying forever. A workflow held for its destructive batch is
 * resumed once the batch is approved, and aborted (the machine failed, `BATCH_REJECTED` or `BATCH_EXPIRED`) once it is
 * rejected or expired; while it waits the reconciler comes back at the batch's expiry. It never polls: it runs when a
 * workflow it owns ends or a batch of its machine is approved or rejected (and once more is harmless).
 *
 * @example
 * ```ts
 * const module = { id: 'metal', reconcilers: { [METAL_WORK_KIND]: metalReconciler(profiles) } };
 * ```
 */
export function metalReconciler(profiles: PhaseProfiles): Reconciler {
  return async (key: string, ctx: ModuleContext) => {
    return ctx.sql.transaction(async (tx): Promise<ReconcileResult | undefined> => {
      const machine = await readMachine(tx, key, { forUpdate: true });
      if (!machine || machine.workflowId === null) return;
      const held = await readHeldWorkflow(tx, machine.workflowId);
      if (held) return settleBatch(tx, ctx, profiles, machine, held);
      const end = await readWorkflowEnd(tx, machine.workflowId);
      if (!end) return;
      const move = decideWorkflowEnd(snapshotOf(machine), end.outcome);
      if (!move) return;
      const extras = move.to === 'failed' ? { lastError: errorOf(machine, machine.workflowId, end) } : {};
      if (!move.startsWorkflow) {
        await applyMove(tx, ctx, profiles, machine, move, extras);
        return;
      }
      try {
        // A savepoint: a next phase that cannot start leaves nothing of its attempt behind.
        await tx.transaction((inner) => applyMove(inner, ctx, profiles, machine, move, extras));
      } catch (error) {
        if (!isComputeError(error) || !UNSTARTABLE.has(error.code)) throw error;
        // Retrying would fail the same way until an operator fixes the profile: the machine fails in the phase it
        // could not start, and recover starts it again.
        const phase = move.to as PhaseState;
        await applyMove(
          tx,
          ctx,
          profiles,
          machine,
          { ...move, to: 'failed', startsWorkflow: false, failedFrom: phase, held: false },
          { lastError: { code: error.code, message: error.message, workflowId: null, phase } },
        );
      }
    });
  };
}
