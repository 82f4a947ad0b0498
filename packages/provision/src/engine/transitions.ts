import { addMs, type Json, type ModuleContext, type SqlExecutor } from '@better-compute/core';
import { applyHostConfig } from '../config-units/apply';
import type { ConfigUnitRegistry } from '../config-units/types';
import type { WorkflowState } from './constants';
import { publishWorkflowEvent, stepEventData } from './events';
import { requireTransaction } from './staged-writes';
import type { StepRegistry } from './step-registry';
import {
  type StepError,
  type StepRecord,
  updateStep,
  updateWorkflow,
  type WorkflowError,
  type WorkflowRecord,
} from './workflow-rows';

/**
 * What every transition needs: the module context (its `sql` is not used; transitions get `tx`), the steps, and the
 * config units a succeeded workflow's `hostConfig` resolves against.
 */
export interface EngineEnv {
  ctx: ModuleContext;
  steps: StepRegistry;
  configUnits: ConfigUnitRegistry;
}

const OPEN_COMMAND = new Set(['pending', 'dispatched', 'acked', 'running']);

/**
 * Starts a step's attempt: `running`, with its deadline the start plus its timeout.
 *
 * @example
 * ```ts
 * await startStep(tx, env, workflow, step, now);
 * ```
 */
export async function startStep(
  tx: SqlExecutor,
  env: EngineEnv,
  workflow: WorkflowRecord,
  step: StepRecord,
  now: Date,
): Promise<void> {
  await updateStep(
    tx,
    step,
    {
      state: 'running',
      startedAt: now,
      firstStartedAt: step.firstStartedAt ?? now,
      deadline: addMs(now, step.timeoutMs),
      finishedAt: null,
      error: null,
      result: null,
      commandId: null,
      rejoin: null,
    },
    now,
  );
  await publishWorkflowEvent(tx, env.ctx.events, workflow, 'workflow.step.started', stepEventData(step));
}

/**
 * Settles a step `succeeded` with its result.
 *
 * @example
 * ```ts
 * await succeedStep(tx, env, workflow, step, { url }, now);
 * ```
 */
export async function succeedStep(
  tx: SqlExecutor,
  env: EngineEnv,
  workflow: WorkflowRecord,
  step: StepRecord,
  result: Json,
  now: Date,
): Promise<void> {
  await updateStep(tx, step, { state: 'succeeded', result, finishedAt: now }, now);
  await publishWorkflowEvent(tx, env.ctx.events, workflow, 'workflow.step.succeeded', stepEventData(step));
}

/**
 * Marks a step `skipped` (a false `when`, or a definition's cleanup whose step never started).
 *
 * @example
 * ```ts
 * await skipStep(tx, env, workflow, step, 'when is false', now);
 * ```
 */
export async function skipStep(
  tx: SqlExecutor,
  env: EngineEnv,
  workflow: WorkflowRecord,
  step: StepRecord,
  reason: string,
  now: Date,
): Promise<void> {
  await updateStep(tx, step, { state: 'skipped', finishedAt: now }, now);
  await publishWorkflowEvent(tx, env.ctx.events, workflow, 'workflow.step.skipped', stepEventData(step, { reason }));
}

/**
 * Cancels the command a step has in flight, if it is still open.
 *
 * @example
 * ```ts
 * await cancelStepCommand(tx, env, step, 'the step timed out');
 * ```
 */
export async function cancelStepCommand(tx: SqlExecutor, env: EngineEnv, step: StepRecord, reason: string) {
  if (!step.commandId) return;
  requireTransaction(tx);
  const command = await env.ctx.commands.get(tx, step.commandId);
  if (command && OPEN_COMMAND.has(command.state)) await env.ctx.commands.cancel(tx, command.id, reason);
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
 * await enterFailing(tx, workflow, steps, step, false, now);
 * ```
 */
export async function enterFailing(
  tx: SqlExecutor,
  workflow: WorkflowRecord,
  steps: readonly StepRecord[],
  step: StepRecord,
  rescue: boolean,
  now: Date,
): Promise<void> {
  await updateWorkflow(
    tx,
    workflow,
    { state: 'failing', error: workflowErrorOf(step, step.error as StepError, rescue) },
    now,
  );
  for (const other of steps) {
    if (other.phase === 'main' && other.state === 'pending') {
      await updateStep(tx, other, { state: 'cancelled', finishedAt: now }, now);
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
 * await failStep(tx, env, workflow, steps, step, { code: 'TIMEOUT', message: 'no result before the deadline' }, now);
 * ```
 */
export async function failStep(
  tx: SqlExecutor,
  env: EngineEnv,
  workflow: WorkflowRecord,
  steps: readonly StepRecord[],
  step: StepRecord,
  error: StepError,
  now: Date,
): Promise<void> {
  await updateStep(tx, step, { state: 'failed', error, finishedAt: now }, now);
  await publishWorkflowEvent(
    tx,
    env.ctx.events,
    workflow,
    'workflow.step.failed',
    stepEventData(step, { error: { code: error.code, message: error.message } }),
  );
  if (step.attempt - step.attemptBase < step.retries) {
    await updateStep(
      tx,
      step,
      { state: 'pending', attempt: step.attempt + 1, commandId: null, deadline: null, startedAt: null, rejoin: null },
      now,
    );
    await publishWorkflowEvent(tx, env.ctx.events, workflow, 'workflow.step.retrying', stepEventData(step));
    return;
  }
  if (step.phase !== 'main' || step.onFailure === 'continue') return;
  if (workflow.state === 'running' || workflow.state === 'paused') {
    await enterFailing(tx, workflow, steps, step, step.onFailure === 'rescue', now);
  }
}

const FINAL_EVENT = {
  succeeded: 'workflow.succeeded',
  failed: 'workflow.failed',
  cancelled: 'workflow.cancelled',
} as const;

/**
 * Ends a workflow: steps never reached are cancelled, the final event is published and the owner is queued under the
 * workflow's key. A node workflow that succeeds with a `hostConfig` first sets the node's NodeSpec `host` section
 * (resolved on the node's labels as they are now) and bumps its `generation`; when the host config does not resolve,
 * the workflow ends `failed` with that error instead and the node is left alone.
 *
 * @example
 * ```ts
 * await finishWorkflow(tx, env, workflow, steps, 'succeeded', now);
 * ```
 */
export async function finishWorkflow(
  tx: SqlExecutor,
  env: EngineEnv,
  workflow: WorkflowRecord,
  steps: readonly StepRecord[],
  outcome: Extract<WorkflowState, 'succeeded' | 'failed' | 'cancelled'>,
  now: Date,
): Promise<void> {
  const nodeId = workflow.nodeId;
  const hostConfig = outcome === 'succeeded' && nodeId !== null ? workflow.document.hostConfig : undefined;
  // The node's NodeSpec and the owner's queue are written in the transaction that ends the workflow.
  if (hostConfig !== undefined || workflow.owner) requireTransaction(tx);
  for (const step of steps) {
    if (step.state === 'pending') await updateStep(tx, step, { state: 'cancelled', finishedAt: now }, now);
  }
  let state = outcome;
  let error: WorkflowError | undefined;
  if (hostConfig !== undefined && nodeId !== null) {
    error = await applyHostConfig(tx, env.configUnits, nodeId, hostConfig, now);
    if (error) state = 'failed';
  }
  await updateWorkflow(tx, workflow, { state, finishedAt: now, ...(error ? { error } : {}) }, now);
  const extra: { [key: string]: Json } = {};
  if (state === 'failed' && workflow.error) extra.error = { ...workflow.error };
  if (state === 'cancelled' && workflow.cancelReason) extra.reason = workflow.cancelReason;
  await publishWorkflowEvent(tx, env.ctx.events, workflow, FINAL_EVENT[state], extra);
  if (workflow.owner) await env.ctx.work.enqueue(tx, { kind: workflow.owner, key: workflow.key });
}
