import type { Json, ModuleContext } from '@better-compute/core';
import { addMs } from '@better-compute/core/kernel';
import type { ConfigUnitRegistry } from '../config-units/types';
import type { DriverTarget, WorkflowPreload } from '../define/types';
import type { WorkflowEndWrite } from '../define/workflow-end-write';
import type { WorkflowState } from './constants';
import { stepEventData } from './events';
import type { Known, Need, PlanDraft } from './plan';
import type { StepRegistry } from './step-registry';
import type { StepError, StepRecord, WorkflowError } from './workflow-rows';

/**
 * What every transition needs: the module context (for its ports and registries; transitions never use its `sql`),
 * the steps, and the config units a succeeded workflow's `hostConfig` resolves against.
 */
export interface EngineEnv {
  ctx: ModuleContext;
  steps: StepRegistry;
  configUnits: ConfigUnitRegistry;
  /** Modules' driver targets: read only when a driver operation's command is sent. */
  driverTargets?: readonly DriverTarget[];
  /** Owners' end writes, by owner: written with the statement that ends a workflow of theirs. */
  endWrites?: ReadonlyMap<string, WorkflowEndWrite>;
  /** Modules' workflow preloads: what the claim reads for the runs, and says of a workflow an end write starts. */
  workflowPreloads?: readonly WorkflowPreload[];
}

/**
 * Starts a step's attempt: `running`, with its deadline the start plus its timeout.
 *
 * @example
 * ```ts
 * startStep(draft, step, now);
 * ```
 */
export function startStep(draft: PlanDraft, step: StepRecord, now: Date): void {
  draft.updateStep(step, {
    state: 'running',
    startedAt: now,
    firstStartedAt: step.firstStartedAt ?? now,
    deadline: addMs(now, step.timeoutMs),
    finishedAt: null,
    error: null,
    result: null,
    commandId: null,
    rejoin: null,
  });
  draft.event('workflow.step.started', stepEventData(step));
}

/**
 * Settles a step `succeeded` with its result.
 *
 * @example
 * ```ts
 * succeedStep(draft, step, { url }, now);
 * ```
 */
export function succeedStep(draft: PlanDraft, step: StepRecord, result: Json, now: Date): void {
  draft.updateStep(step, { state: 'succeeded', result, finishedAt: now });
  draft.event('workflow.step.succeeded', stepEventData(step));
}

/**
 * Marks a step `skipped` (a false `when`, or a definition's cleanup whose step never started).
 *
 * @example
 * ```ts
 * skipStep(draft, step, 'when is false', now);
 * ```
 */
export function skipStep(draft: PlanDraft, step: StepRecord, reason: string, now: Date): void {
  draft.updateStep(step, { state: 'skipped', finishedAt: now });
  draft.event('workflow.step.skipped', stepEventData(step, { reason }));
}

/**
 * Cancels the command a step has in flight, if it is still open (when the plan is written).
 *
 * @example
 * ```ts
 * cancelStepCommand(draft, step, 'the step timed out');
 * ```
 */
export function cancelStepCommand(draft: PlanDraft, step: StepRecord, reason: string): void {
  if (step.commandId) draft.cancelCommand(step.commandId, reason);
}

/**
 * The workflow's own error for a failed step: `<stepId> (<action>): <message>` with the step's code.
 *
 * @example
 * ```ts
 * workflowErrorOf(step, { code: 'TIMEOUT', message: 'no result before the deadline' }, false);
 * ```
 */
export function workflowErrorOf(step: StepRecord, error: StepError, rescue: boolean) {
  return {
    code: error.code,
    message: `${step.stepId} (${step.action}): ${error.message}`,
    stepId: step.stepId,
    action: step.action,
    ...(error.reason ? { reason: error.reason } : {}),
    ...(rescue ? { rescue: true as const } : {}),
  };
}

/**
 * Marks the workflow failing after `step` failed for good: the error recorded, the rest of the main phase cancelled;
 * the step's on-failure step (if any) and then the cleanup phase run next.
 *
 * @example
 * ```ts
 * enterFailing(draft, step, false, now);
 * ```
 */
export function enterFailing(draft: PlanDraft, step: StepRecord, rescue: boolean, now: Date): void {
  draft.updateWorkflow({ state: 'failing', error: workflowErrorOf(step, step.error as StepError, rescue) }, now);
  for (const other of draft.steps) {
    if (other.phase === 'main' && other.state === 'pending') {
      draft.updateStep(other, { state: 'cancelled', finishedAt: now });
    }
  }
}

/**
 * Fails a step's attempt. With retries left it goes back to `pending` with `attempt + 1` (its command gets a new key);
 * once they are spent, a main step's `onFailure` decides: `continue` moves on, `fail`/`rescue`/a step mark the workflow
 * failing. A failed on-failure or cleanup step never stops the rest.
 *
 * @example
 * ```ts
 * failStep(draft, step, { code: 'TIMEOUT', message: 'no result before the deadline' }, now);
 * ```
 */
export function failStep(draft: PlanDraft, step: StepRecord, error: StepError, now: Date): void {
  draft.updateStep(step, { state: 'failed', error, finishedAt: now });
  draft.event('workflow.step.failed', stepEventData(step, { error: { code: error.code, message: error.message } }));
  if (step.attempt - step.attemptBase < step.retries) {
    draft.updateStep(step, {
      state: 'pending',
      attempt: step.attempt + 1,
      commandId: null,
      deadline: null,
      startedAt: null,
      rejoin: null,
    });
    draft.event('workflow.step.retrying', stepEventData(step));
    return;
  }
  if (step.phase !== 'main' || step.onFailure === 'continue') return;
  const { workflow } = draft;
  if (workflow.state === 'running' || workflow.state === 'paused') {
    enterFailing(draft, step, step.onFailure === 'rescue', now);
  }
}

const FINAL_EVENT = {
  succeeded: 'workflow.succeeded',
  failed: 'workflow.failed',
  cancelled: 'workflow.cancelled',
} as const;

/**
 * Ends a workflow: steps never reached are cancelled, the final event is published and the owner is queued under the
 * workflow's key. A node workflow that succeeds with a `hostConfig` needs it resolved on the node's labels as they are
 * now (`known.hostConfig`, read with the node locked) and then sets the node's NodeSpec `host` section (bumping its
 * `generation`); when the host config does not resolve, the workflow ends `failed` with that error instead and the
 * node is left alone. Returns the need when the host config is not known yet; the draft is then untouched.
 *
 * @example
 * ```ts
 * const need = finishWorkflow(draft, 'succeeded', known, now);
 * ```
 */
export function finishWorkflow(
  draft: PlanDraft,
  outcome: Extract<WorkflowState, 'succeeded' | 'failed' | 'cancelled'>,
  known: Known,
  now: Date,
): Need | undefined {
  const { workflow } = draft;
  const nodeId = workflow.nodeId;
  const hostConfig = outcome === 'succeeded' && nodeId !== null ? workflow.document.hostConfig : undefined;
  if (hostConfig !== undefined && nodeId !== null && known.hostConfig === undefined) {
    return { kind: 'host-config', nodeId, hostConfig };
  }
  for (const step of draft.steps) {
    if (step.state === 'pending') draft.updateStep(step, { state: 'cancelled', finishedAt: now });
  }
  let state = outcome;
  let error: WorkflowError | undefined;
  const resolved = hostConfig !== undefined ? known.hostConfig : undefined;
  if (resolved && 'error' in resolved) {
    error = resolved.error;
    state = 'failed';
  } else if (resolved && nodeId !== null) {
    draft.setHostConfig(nodeId, resolved.host);
  }
  draft.updateWorkflow({ state, finishedAt: now, ...(error ? { error } : {}) }, now);
  const extra: { [key: string]: Json } = {};
  if (state === 'failed' && workflow.error) extra.error = { ...workflow.error };
  if (state === 'cancelled' && workflow.cancelReason) extra.reason = workflow.cancelReason;
  draft.event(FINAL_EVENT[state], extra);
  if (workflow.owner) draft.queueOwner(workflow.owner, workflow.key);
  return undefined;
}
