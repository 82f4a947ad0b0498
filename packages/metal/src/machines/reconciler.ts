import { isComputeError, type ModuleContext, type Reconciler, type SqlExecutor } from '@better-compute/core';
import { decideWorkflowEnd } from '../lifecycle/decide';
import type { PhaseState } from '../lifecycle/states';
import { applyMove, type PhaseProfiles } from './apply-move';
import { type MachineError, type MachineRecord, readMachine, snapshotOf } from './machine-rows';

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
 * The `metal` reconciler: reads the machine (locked) and the workflow it recorded, and when that workflow has ended
 * decides with `decideWorkflowEnd` and carries the move out in the same transaction (success: the next state, or the
 * next phase of an enroll, or a hold; failure or cancellation: `failed` with the workflow's error in `last_error`). A
 * machine whose workflow still runs, or that an abort already moved, is left alone. When the next phase's workflow
 * cannot start (its profile is missing or does not resolve, another workflow is active) the machine fails in that
 * phase with the refusal as its error, rather than retrying forever. It never polls: it runs when a workflow it owns
 * ends (and once more is harmless).
 *
 * @example
 * ```ts
 * const module = { id: 'metal', reconcilers: { [METAL_WORK_KIND]: metalReconciler(profiles) } };
 * ```
 */
export function metalReconciler(profiles: PhaseProfiles): Reconciler {
  return async (key: string, ctx: ModuleContext) => {
    await ctx.sql.transaction(async (tx) => {
      const machine = await readMachine(tx, key, { forUpdate: true });
      if (!machine || machine.workflowId === null) return;
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
