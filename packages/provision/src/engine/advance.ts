import { evaluateWhen } from '@better-compute/core';
import { checkAgentStep, type Step, sendAgentCommand } from './agent-step';
import type { Decision, RunRequest } from './decision';
import { type Known, type Need, type Plan, PlanDraft } from './plan';
import { type EngineEnv, failStep, finishWorkflow, skipStep, startStep } from './transitions';
import type { LoadedWorkflow, StepRecord, WorkflowRecord } from './workflow-rows';

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
    workflow: {
      profile: workflow.document,
      owner: workflow.owner,
      startedAt: workflow.startedAt ?? workflow.createdAt,
    },
  };
}

async function handleInFlight(
  draft: PlanDraft,
  env: EngineEnv,
  step: StepRecord,
  known: Known,
  now: Date,
): Promise<Step> {
  const { workflow } = draft;
  if (step.runsOn !== 'control-plane') {
    return step.state === 'running'
      ? sendAgentCommand(draft, env, step, known, now)
      : checkAgentStep(draft, step, known, now);
  }
  if (step.deadline && now.getTime() >= step.deadline.getTime()) {
    failStep(draft, step, { code: 'TIMEOUT', message: 'no result before the step deadline' }, now);
    return { kind: 'continue' };
  }
  // Running and not overdue: the previous run ended without settling (a crash, or stepNotReady). Run it again under
  // the same idempotency key.
  return { kind: 'run', request: runRequestOf(workflow, step) };
}

async function decide(draft: PlanDraft, env: EngineEnv, known: Known, now: Date): Promise<Step> {
  const { workflow, steps } = draft;
  if (workflow.state === 'pending') {
    draft.updateWorkflow({ state: 'running', startedAt: now }, now);
    draft.event('workflow.started');
    return { kind: 'continue' };
  }
  const inFlight = steps.find((s) => s.state === 'running' || s.state === 'waiting');
  if (inFlight) return handleInFlight(draft, env, inFlight, known, now);
  if (workflow.state === 'paused') return { kind: 'idle' };
  const next = nextStep(workflow, steps);
  if ('finish' in next) {
    const need = finishWorkflow(draft, next.finish, known, now);
    return need ? { kind: 'needs', need } : { kind: 'idle' };
  }
  const { step } = next;
  if (step.spec.when !== undefined && !evaluateWhen(step.spec.when, draft.nodeLabels())) {
    skipStep(draft, step, 'when is false', now);
    return { kind: 'continue' };
  }
  const parent =
    step.phase === 'cleanup' && step.parentStepId ? steps.find((s) => s.stepId === step.parentStepId) : undefined;
  if (parent && parent.firstStartedAt === null) {
    skipStep(draft, step, `${parent.stepId} never started`, now);
    return { kind: 'continue' };
  }
  startStep(draft, step, now);
  if (step.runsOn === 'control-plane') return { kind: 'run', request: runRequestOf(workflow, step) };
  // An agent step's command is sent by the transition that starts it.
  return sendAgentCommand(draft, env, step, known, now);
}

/** What one transition comes to: a plan and what follows it, or what must be read before it can decide. */
export type Transition =
  | { readonly decision: Decision; readonly plan: Plan; readonly next: LoadedWorkflow }
  | { readonly needs: Need };

/**
 * One transition of a workflow, decided on the snapshot and what was read for it (`known`): start it, look at the
 * step in flight, or skip, start or finish what comes next. It returns the plan (see `commitPlan`) and the snapshot as
 * the plan leaves it, or what it still needs to know; it never touches the database, and the snapshot is not changed.
 *
 * @example
 * ```ts
 * const transition = await advanceWorkflow(env, snapshot, {}, ctx.clock.now());
 * if ('needs' in transition) known = await readNeed(tx, env, transition.needs, now);
 * ```
 */
export async function advanceWorkflow(
  env: EngineEnv,
  snapshot: LoadedWorkflow,
  known: Known,
  now: Date,
): Promise<Transition> {
  const draft = new PlanDraft(snapshot);
  const step = await decide(draft, env, known, now);
  if (step.kind === 'needs') return { needs: step.need };
  return { decision: step, plan: draft.plan(), next: draft.snapshot() };
}
