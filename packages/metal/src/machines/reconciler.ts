import {
  isComputeError,
  type ModuleContext,
  type ReconcileResult,
  type Reconciler,
  type SqlExecutor,
} from '@better-compute/core';
import { commit } from '@better-compute/core/kernel';
import { decideRequest, decideWorkflowEnd } from '../lifecycle/decide';
import type { PhaseState } from '../lifecycle/states';
import { applyMove, forgetUserData, type PhaseProfiles } from './apply-move';
import { forgetBootEntrySecrets, forgetSecretsAfterCommit } from './boot-entry-secrets';
import {
  MACHINE_COLUMNS,
  MACHINE_FROM,
  type MachineError,
  type MachineRecord,
  snapshotOf,
  toMachineRecord,
} from './machine-rows';
import { HELD_WORKFLOW_SQL } from './quorum';
import { stageSucceededMove } from './staged-move';

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

/** The machine, and what the reconciler needs of the workflow it recorded: held for its batch, or ended. */
interface Reading {
  machine: MachineRecord;
  /** The machine row's version (`xmin`) as read. */
  version: string;
  held: { workflowId: string; batchId: string } | undefined;
  end: WorkflowEnd | undefined;
}

// The machine with what the reconciler needs of its recorded workflow, and its row's version: one row per machine.
const MACHINE_AND_WORKFLOW_SQL = `SELECT ${MACHINE_COLUMNS}, m.xmin::text AS version, w.id AS wf_id,
    w.state AS wf_state, w.error AS wf_error, w.cancel_reason AS wf_cancel_reason, w.batch_id AS wf_batch_id,
    ${HELD_WORKFLOW_SQL('w')} AS wf_held
  FROM ${MACHINE_FROM} LEFT JOIN workflows w ON w.id = m.workflow_id`;

/**
 * The claim's read of the machine for the `metal` reconciler (its `preload`): the same row the reconciler reads, as
 * JSON, so that a workflow's end is decided and moved by one statement after the claim.
 *
 * @example
 * ```ts
 * metalMachineReadSql('$1::text'); // (SELECT to_json(x) FROM (SELECT m.node_id, … WHERE m.node_id = $1::text) x)
 * ```
 */
export function metalMachineReadSql(key: string): string {
  return `(SELECT to_json(x) FROM (${MACHINE_AND_WORKFLOW_SQL} WHERE m.node_id = ${key}) x)`;
}

function readingOf(row: Record<string, unknown>): Reading {
  const machine = toMachineRecord(row);
  const version = String(row.version);
  if (machine.workflowId === null) return { machine, version, held: undefined, end: undefined };
  if (row.wf_held === true) {
    const held = { workflowId: machine.workflowId, batchId: row.wf_batch_id as string };
    return { machine, version, held, end: undefined };
  }
  // A workflow that is gone ended as far as metal can tell: nothing will ever end it again.
  if (row.wf_id === null || row.wf_id === undefined) {
    const gone = { code: 'INTERNAL', message: 'the workflow is gone' };
    return { machine, version, held: undefined, end: { outcome: 'failed', error: gone, cancelReason: null } };
  }
  const state = row.wf_state as string;
  if (state !== 'succeeded' && state !== 'failed' && state !== 'cancelled') {
    return { machine, version, held: undefined, end: undefined };
  }
  const error = (row.wf_error as WorkflowEnd['error']) ?? null;
  const cancelReason = (row.wf_cancel_reason as string | null) ?? null;
  return { machine, version, held: undefined, end: { outcome: state, error, cancelReason } };
}

/**
 * Locks the machine's row (a statement of its own, as `readMachine` does: the read after it sees the node as it is
 * now), then reads the machine with its recorded workflow in one statement.
 */
async function readMachineAndWorkflow(tx: SqlExecutor, nodeId: string): Promise<Reading | undefined> {
  const locked = await tx.query('SELECT 1 FROM metal_machines m WHERE m.node_id = $1 FOR UPDATE', [nodeId]);
  if (locked.rowCount === 0) return undefined;
  const { rows } = await tx.query<Record<string, unknown>>(`${MACHINE_AND_WORKFLOW_SQL} WHERE m.node_id = $1`, [
    nodeId,
  ]);
  return rows[0] ? readingOf(rows[0]) : undefined;
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

/** The move a machine's ended workflow decides (none when it no longer applies), with the error a failure leaves. */
function moveAtEnd(machine: MachineRecord & { workflowId: string }, end: WorkflowEnd) {
  const move = decideWorkflowEnd(snapshotOf(machine), end.outcome);
  if (!move) return undefined;
  return { move, extras: move.to === 'failed' ? { lastError: errorOf(machine, machine.workflowId, end) } : {} };
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
 * A workflow's end moved by one statement after the claim, from the machine as the claim read it (`ctx.preloaded`,
 * without a lock; see `stageSucceededMove`), written only while the worker holds its shard. Undefined when this
 * cannot be done so (no preload, a batch to settle, a failed or cancelled workflow, the quorum's approvers, a start
 * that cannot be staged or is refused, a machine changed since the claim): the reconciler then does it in a
 * transaction, as before.
 */
async function moveFromPreload(
  ctx: ModuleContext,
  profiles: PhaseProfiles,
  preloaded: unknown,
): Promise<{ forgotten: string | undefined; doneWritten: boolean } | undefined> {
  if (typeof preloaded !== 'object' || preloaded === null) return undefined;
  const { machine, version, held, end } = readingOf(preloaded as Record<string, unknown>);
  const { workflowId } = machine;
  // A workflow that failed or was cancelled may have left its boot entries' secrets: the transaction deletes them.
  if (held || !end || workflowId === null || end.outcome !== 'succeeded') return undefined;
  const staged = await stageSucceededMove(ctx, profiles, { ...machine, workflowId }, version);
  if (!staged) return undefined;
  const written = await commit(ctx, {
    changes: staged.changes,
    events: staged.events,
    ...(staged.wake ? { wake: staged.wake } : {}),
    // The pass ends here: its own item goes with the move (unless enqueued again since the claim).
    done: true,
  });
  if (written.status !== 'committed') return undefined;
  return { forgotten: staged.forgotten, doneWritten: written.doneWritten === true };
}

/**
 * The `metal` reconciler: reads the machine (locked) and the workflow it recorded, and when that workflow has ended
 * decides with `decideWorkflowEnd` and carries the move out in the same transaction (or, first, by one statement from
 * the claim's read, see {@link moveFromPreload}) (success: the next state, or the
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
  const reconcile = async (key: string, ctx: ModuleContext) => {
    const fast = ctx.preloaded === undefined ? undefined : await moveFromPreload(ctx, profiles, ctx.preloaded);
    if (fast) {
      await forgetUserData(ctx, fast.forgotten);
      return fast.doneWritten ? { doneWritten: true as const } : undefined;
    }
    let forgotten: string | undefined;
    let secretsLeft: string[] = [];
    const result = await ctx.sql.transaction(async (tx): Promise<ReconcileResult | undefined> => {
      forgotten = undefined;
      secretsLeft = [];
      const reading = await readMachineAndWorkflow(tx, key);
      if (!reading || reading.machine.workflowId === null) return;
      const { machine, held, end } = reading;
      if (held) return settleBatch(tx, ctx, profiles, machine, held);
      const { workflowId } = machine;
      if (!end || workflowId === null) return;
      // Its ramdisk step, cut short, deleted no boot entry's secret: they go with the move.
      if (end.outcome !== 'succeeded') secretsLeft = await forgetBootEntrySecrets(tx, ctx, workflowId);
      const decided = moveAtEnd({ ...machine, workflowId }, end);
      if (!decided) return;
      const { move, extras } = decided;
      if (!move.startsWorkflow) {
        ({ forgottenUserDataRef: forgotten } = await applyMove(tx, ctx, profiles, machine, move, extras));
        return;
      }
      try {
        // A refused start writes nothing before it throws (applyMove starts first), but for the batch approvers
        // make it write: only then a savepoint, so that nothing of the attempt is left behind.
        await (ctx.quorum?.enabled()
          ? tx.transaction((inner) => applyMove(inner, ctx, profiles, machine, move, extras))
          : applyMove(tx, ctx, profiles, machine, move, extras));
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
    // The machine is available or retired again: its last deploy request's user data is needed no more.
    await forgetUserData(ctx, forgotten);
    await forgetSecretsAfterCommit(ctx, secretsLeft);
    return result;
  };
  // The claim reads the machine with its workflow, so a workflow's end is moved by one statement after it.
  return Object.assign(reconcile, { preload: { sql: (key: string) => metalMachineReadSql(key) } });
}
