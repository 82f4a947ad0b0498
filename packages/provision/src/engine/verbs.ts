import { ComputeError, type ErrorReason, type ModuleContext, type SqlExecutor } from '@better-compute/core';
import { assertStorableText } from '@better-compute/core/checks';
import { HOST_CONFIG_ERROR_STEP } from '../config-units/apply';
import { BUILTIN_CONFIG_UNIT_REGISTRY } from '../config-units/registry';
import { inCleanupPhase } from './advance';
import { commitPlan } from './commit-plan';
import { ACTIVE_STATES_SQL, WORKFLOW_WORK_KIND } from './constants';
import { isEmptyPlan, PlanDraft } from './plan';
import { type EngineEnv, finishWorkflow } from './transitions';
import { loadWorkflow, type StepRecord } from './workflow-rows';
import { toWorkflowView, type WorkflowView } from './workflow-view';

/** What the verbs need of the module context. */
export type VerbContext = Pick<ModuleContext, 'sql' | 'clock' | 'events' | 'work' | 'commands'>;

/** Which workflow a verb acts on; with `tenantId`, a workflow of another tenant is NOT_FOUND. */
export interface WorkflowRef {
  workflowId: string;
  tenantId?: string;
}

function notFound(workflowId: string): ComputeError {
  return new ComputeError('NOT_FOUND', `workflow ${workflowId} not found`, { details: { path: ['workflowId'] } });
}

// The id goes into a query: one PostgreSQL cannot hold (a NUL, a lone surrogate) is the caller's mistake, not INTERNAL.
function checkWorkflowId(ref: WorkflowRef): void {
  if (typeof ref?.workflowId !== 'string' || ref.workflowId.length === 0) {
    throw new ComputeError('INVALID_INPUT', 'workflowId must be a non-empty string', {
      details: { path: ['workflowId'] },
    });
  }
  assertStorableText(ref.workflowId, ['workflowId']);
}

/**
 * Runs `change` on the locked workflow in its own transaction: it plans on a draft (and may read and wake through
 * `tx`), then the plan is written there; returns the workflow as it then is.
 */
async function withLockedWorkflow(
  ctx: VerbContext,
  ref: WorkflowRef,
  change: (draft: PlanDraft, tx: SqlExecutor, now: Date) => Promise<void>,
): Promise<WorkflowView> {
  checkWorkflowId(ref);
  return ctx.sql.transaction(async (tx) => {
    const loaded = await loadWorkflow(tx, ref.workflowId, { lock: true });
    if (!loaded || (ref.tenantId !== undefined && loaded.workflow.tenantId !== ref.tenantId))
      throw notFound(ref.workflowId);
    const draft = new PlanDraft(loaded);
    const now = ctx.clock.now();
    await change(draft, tx, now);
    const plan = draft.plan();
    if (!isEmptyPlan(plan)) await commitPlan(envOf(ctx), plan, now, { tx });
    return toWorkflowView(draft.snapshot());
  });
}

function envOf(ctx: VerbContext): EngineEnv {
  // The verbs never run steps nor finish a workflow `succeeded`, so neither the step registry nor the module's config
  // units are needed; transitions only use the ports.
  return { ctx: ctx as ModuleContext, steps: new Map(), configUnits: BUILTIN_CONFIG_UNIT_REGISTRY };
}

async function wake(tx: SqlExecutor, ctx: VerbContext, draft: PlanDraft): Promise<void> {
  await ctx.work.enqueue(tx, { kind: WORKFLOW_WORK_KIND, key: draft.workflow.key, urgent: true });
}

function invalidState(message: string, reason: ErrorReason<'INVALID_STATE'>): ComputeError {
  return new ComputeError('INVALID_STATE', message, { details: { reason } });
}

/**
 * Aborts a workflow: pending steps and the in-flight command are cancelled, the cleanup phase runs and the workflow
 * ends `cancelled`. A pending or failed workflow is cancelled at once, with no cleanup owed. Aborting twice does
 * nothing; aborting a succeeded workflow is INVALID_STATE.
 *
 * @example
 * ```ts
 * await abortWorkflow(compute.context, { workflowId, reason: 'wrong image' });
 * ```
 */
export async function abortWorkflow(ctx: VerbContext, input: WorkflowRef & { reason?: string }): Promise<WorkflowView> {
  const reason = input?.reason;
  if (reason !== undefined && (typeof reason !== 'string' || reason.length > 1024)) {
    throw new ComputeError('INVALID_INPUT', 'reason must be a string of at most 1024 characters', {
      details: { path: ['reason'] },
    });
  }
  if (reason !== undefined) assertStorableText(reason, ['reason']);
  return withLockedWorkflow(ctx, input, async (draft, tx, now) => {
    const { workflow, steps } = draft;
    if (workflow.state === 'succeeded') throw invalidState(`workflow ${workflow.id} already succeeded`, 'succeeded');
    if (workflow.state === 'cancelled' || workflow.state === 'cancelling') return;
    draft.updateWorkflow({ cancelReason: reason ?? 'aborted' }, now);
    if (workflow.state === 'pending' || workflow.state === 'failed') {
      // Cancelled: no host config to resolve, so nothing to read first.
      finishWorkflow(draft, 'cancelled', {}, now);
      return;
    }
    for (const step of steps) {
      if (step.phase === 'cleanup') continue;
      if (step.state === 'running' || step.state === 'waiting') {
        // Every open command the step sent: an agent step's own, and a control-plane step's relayed ones (a power
        // cycle, an image write), which its row does not record.
        draft.cancelCommandsOf(step.stepId, `workflow aborted: ${reason ?? 'aborted'}`);
      }
      if (['pending', 'running', 'waiting'].includes(step.state)) {
        draft.updateStep(step, { state: 'cancelled', finishedAt: now });
      }
    }
    draft.updateWorkflow({ state: 'cancelling' }, now);
    await wake(tx, ctx, draft);
  });
}

function firstUnfinishedMain(steps: readonly StepRecord[]): StepRecord | undefined {
  return steps.find((s) => s.phase === 'main' && s.state !== 'succeeded' && s.state !== 'skipped');
}

/**
 * Runs a failed workflow again from `fromStep` (by default the first main step that did not succeed or was skipped):
 * that step and every later main step go back to `pending` with the next attempt number, the on-failure and cleanup
 * steps are re-armed, and each step gets its retries again. CONFLICT when the node has another active workflow by now.
 * A workflow that failed only because its `hostConfig` did not resolve as it ended (every main step done) is retried
 * without `fromStep` by resolving the host config again, re-running no step.
 *
 * @example
 * ```ts
 * await retryWorkflow(compute.context, { workflowId, fromStep: 'main.3' });
 * ```
 */
export function retryWorkflow(ctx: VerbContext, input: WorkflowRef & { fromStep?: string }): Promise<WorkflowView> {
  return withLockedWorkflow(ctx, input, async (draft, tx, now) => {
    const { workflow, steps } = draft;
    if (workflow.state !== 'failed')
      throw invalidState(`only a failed workflow can be retried; it is ${workflow.state}`, workflow.state);
    const target = workflow.nodeId !== null ? ['node_id', workflow.nodeId] : ['instance_id', workflow.instanceId];
    if (target[1] !== null) {
      const other = await tx.query(
        `SELECT id FROM workflows WHERE ${target[0]} = $1 AND id <> $2 AND state IN ${ACTIVE_STATES_SQL} LIMIT 1`,
        [target[1], workflow.id],
      );
      if (other.rowCount > 0) {
        throw new ComputeError(
          'CONFLICT',
          `${target[0] === 'node_id' ? 'node' : 'instance'} ${target[1]} has another active workflow`,
          {
            details: { path: ['workflowId'] },
          },
        );
      }
    }
    const from =
      input.fromStep === undefined ? firstUnfinishedMain(steps) : steps.find((s) => s.stepId === input.fromStep);
    if (input.fromStep === undefined && from === undefined && workflow.error?.stepId === HOST_CONFIG_ERROR_STEP) {
      // Every step is done: running again only resolves the host config again when the workflow finishes.
      draft.updateWorkflow({ state: 'running', error: null, finishedAt: null }, now);
      draft.event('workflow.retried', { fromStep: HOST_CONFIG_ERROR_STEP });
      await wake(tx, ctx, draft);
      return;
    }
    if (from?.phase !== 'main') {
      throw new ComputeError('INVALID_INPUT', `fromStep must name a main step of the workflow (main.N)`, {
        details: { path: ['fromStep'] },
      });
    }
    for (const step of steps) {
      if (step.phase === 'main' && step.position < from.position) continue;
      const attempt = step.firstStartedAt === null ? step.attempt : step.attempt + 1;
      draft.updateStep(step, {
        state: 'pending',
        attempt,
        attemptBase: attempt,
        commandId: null,
        deadline: null,
        startedAt: null,
        finishedAt: null,
        result: null,
        error: null,
        rejoin: null,
      });
    }
    draft.updateWorkflow({ state: 'running', error: null, finishedAt: null }, now);
    draft.event('workflow.retried', { fromStep: from.stepId });
    await wake(tx, ctx, draft);
  });
}

/**
 * Pauses a running workflow: the step in flight finishes and no further step starts until `resumeWorkflow`. A
 * workflow in its cleanup phase cannot pause; any state but `running` is INVALID_STATE.
 *
 * @example
 * ```ts
 * await pauseWorkflow(compute.context, { workflowId });
 * ```
 */
export function pauseWorkflow(ctx: VerbContext, input: WorkflowRef): Promise<WorkflowView> {
  return withLockedWorkflow(ctx, input, async (draft, _tx, now) => {
    const { workflow, steps } = draft;
    if (workflow.state !== 'running')
      throw invalidState(`only a running workflow can pause; it is ${workflow.state}`, workflow.state);
    if (inCleanupPhase(workflow, steps)) throw invalidState('a workflow in its cleanup phase cannot pause', 'cleanup');
    draft.updateWorkflow({ state: 'paused' }, now);
    draft.event('workflow.paused');
  });
}

/**
 * Resumes a paused workflow: back to `running` (or `pending`, for one held since its start), and woken at once. Any
 * other state is INVALID_STATE.
 *
 * @example
 * ```ts
 * await resumeWorkflow(compute.context, { workflowId });
 * ```
 */
export function resumeWorkflow(ctx: VerbContext, input: WorkflowRef): Promise<WorkflowView> {
  return withLockedWorkflow(ctx, input, async (draft, tx, now) => {
    const { workflow } = draft;
    if (workflow.state !== 'paused')
      throw invalidState(`only a paused workflow can resume; it is ${workflow.state}`, workflow.state);
    // A workflow held since its start (StartWorkflowInput.batchFor) has not started: it starts now.
    draft.updateWorkflow({ state: workflow.startedAt === null ? 'pending' : 'running' }, now);
    draft.event('workflow.resumed');
    await wake(tx, ctx, draft);
  });
}

/**
 * Reads a workflow with every step; NOT_FOUND when it does not exist (or, with `tenantId`, belongs to another tenant).
 *
 * @example
 * ```ts
 * const wf = await getWorkflow(compute.database, { workflowId });
 * wf.steps.map((s) => `${s.stepId} ${s.state}`);
 * ```
 */
export async function getWorkflow(sql: SqlExecutor, ref: WorkflowRef): Promise<WorkflowView> {
  checkWorkflowId(ref);
  const loaded = await loadWorkflow(sql, ref.workflowId);
  if (!loaded || (ref.tenantId !== undefined && loaded.workflow.tenantId !== ref.tenantId))
    throw notFound(ref.workflowId);
  return toWorkflowView(loaded);
}
