import { evaluateWhen, type SqlExecutor } from '@better-compute/core';
import { canStageCommand, checkAgentStep, sendAgentCommand } from './agent-step';
import type { Decision, RunRequest } from './decision';
import { publishWorkflowEvent } from './events';
import { requireTransaction } from './staged-writes';
import { type EngineEnv, failStep, finishWorkflow, skipStep, startStep } from './transitions';
import { type LoadedWorkflow, type StepRecord, updateWorkflow, type WorkflowRecord } from './workflow-rows';

type Next = { step: StepRecord } | { finish: 'succeeded' | 'failed' | 'cancelled' };

/**
 * The step that runs next when none is in flight, or how the workflow ends: the main phase in order, then (once the
 * workflow is failing) the failed step's on-failure step, then the cleanup phase in order.
 *
 * @example
 * ```ts
 * const next = nextStep(workflow, steps);
 * ```
 */
export function nextStep(workflow: WorkflowRecord, steps: readonly StepRecord[]): Next {
  const pending = (phase: StepRecord['phase']) => steps.find((s) => s.phase === phase && s.state === 'pending');
  if (workflow.state === 'running' || workflow.state === 'paused') {
    const main = pending('main');
    if (main) return { step: main };
  }
  if (workflow.state === 'failing') {
    const handler = steps.find(
      (s) => s.phase === 'on-failure' && s.state === 'pending' && s.parentStepId === workflow.error?.stepId,
    );
    if (handler) return { step: handler };
  }
  const cleanup = pending('cleanup');
  if (cleanup) return { step: cleanup };
  const finish = workflow.state === 'failing' ? 'failed' : workflow.state === 'cancelling' ? 'cancelled' : 'succeeded';
  return { finish };
}

/**
 * Whether a workflow is in its cleanup phase: failing or cancelling, or running with the main phase done.
 *
 * @example
 * ```ts
 * if (inCleanupPhase(workflow, steps)) throw new ComputeError('INVALID_STATE', 'a workflow in cleanup cannot pause');
 * ```
 */
export function inCleanupPhase(workflow: WorkflowRecord, steps: readonly StepRecord[]): boolean {
  if (workflow.state === 'failing' || workflow.state === 'cancelling') return true;
  return !steps.some((s) => s.phase === 'main' && ['pending', 'running', 'waiting'].includes(s.state));
}

function runRequestOf(workflow: WorkflowRecord, step: StepRecord): RunRequest {
  const node = workflow.node;
  return {
    workflowId: workflow.id,
    key: workflow.key,
    tenantId: workflow.tenantId,
    stepId: step.stepId,
    action: step.action,
    attempt: step.attempt,
    deadline: step.deadline as Date,
    spec: step.spec,
    node: node ? { id: node.id, siteId: node.siteId, ...(node.poolId ? { poolId: node.poolId } : {}) } : undefined,
    batchId: workflow.batchId ?? undefined,
  };
}

async function handleInFlight(
  tx: SqlExecutor,
  env: EngineEnv,
  loaded: LoadedWorkflow,
  step: StepRecord,
  now: Date,
): Promise<Decision> {
  const { workflow, steps } = loaded;
  if (step.runsOn !== 'control-plane') {
    return step.state === 'running'
      ? sendAgentCommand(tx, env, workflow, steps, step, now)
      : checkAgentStep(tx, env, workflow, steps, step, now, loaded.inFlightCommand);
  }
  if (step.deadline && now.getTime() >= step.deadline.getTime()) {
    await failStep(
      tx,
      env,
      workflow,
      steps,
      step,
      { code: 'TIMEOUT', message: 'no result before the step deadline' },
      now,
    );
    return { kind: 'continue' };
  }
  // Running and not overdue: the previous run ended without settling (a crash, or stepNotReady). Run it again under
  // the same idempotency key.
  return { kind: 'run', request: runRequestOf(workflow, step) };
}

/**
 * One transition of a locked workflow: start it, look at the step in flight, or skip, start or finish what comes
 * next. Returns what the reconciler does after the transaction commits.
 *
 * @example
 * ```ts
 * const decision = await ctx.sql.transaction(async (tx) => {
 *   const loaded = await lockActiveWorkflow(tx, key);
 *   return loaded ? advanceWorkflow(tx, env, loaded, ctx.clock.now()) : { kind: 'idle' };
 * });
 * ```
 */
export async function advanceWorkflow(
  tx: SqlExecutor,
  env: EngineEnv,
  loaded: LoadedWorkflow,
  now: Date,
): Promise<Decision> {
  const { workflow, steps } = loaded;
  if (workflow.state === 'pending') {
    await updateWorkflow(tx, workflow, { state: 'running', startedAt: now }, now);
    await publishWorkflowEvent(tx, env.ctx.events, workflow, 'workflow.started');
    return { kind: 'continue' };
  }
  const inFlight = steps.find((s) => s.state === 'running' || s.state === 'waiting');
  if (inFlight) return handleInFlight(tx, env, loaded, inFlight, now);
  if (workflow.state === 'paused') return { kind: 'idle' };
  const next = nextStep(workflow, steps);
  if ('finish' in next) {
    await finishWorkflow(tx, env, workflow, steps, next.finish, now);
    return { kind: 'idle' };
  }
  const { step } = next;
  if (step.spec.when !== undefined && !evaluateWhen(step.spec.when, workflow.node?.labels ?? {})) {
    await skipStep(tx, env, workflow, step, 'when is false', now);
    return { kind: 'continue' };
  }
  const parent =
    step.phase === 'cleanup' && step.parentStepId ? steps.find((s) => s.stepId === step.parentStepId) : undefined;
  if (parent && parent.firstStartedAt === null) {
    await skipStep(tx, env, workflow, step, `${parent.stepId} never started`, now);
    return { kind: 'continue' };
  }
  // An agent step's command is sent by the transition that starts it: staged with it, or in a transaction.
  if (step.runsOn !== 'control-plane' && !canStageCommand(tx, env, workflow, step)) requireTransaction(tx);
  await startStep(tx, env, workflow, step, now);
  if (step.runsOn === 'control-plane') return { kind: 'run', request: runRequestOf(workflow, step) };
  return sendAgentCommand(tx, env, workflow, steps, step, now);
}
