import type { ModuleContext, Reconciler, SqlExecutor } from '@better-compute/core';
import { BUILTIN_CONFIG_UNIT_REGISTRY } from '../config-units/registry';
import type { ConfigUnitRegistry } from '../config-units/types';
import { advanceWorkflow } from './advance';
import type { Decision, RunRequest } from './decision';
import { type RunOutcome, runControlPlaneStep } from './run-step';
import type { StepRegistry } from './step-registry';
import { type EngineEnv, failStep, succeedStep } from './transitions';
import { lockActiveWorkflow } from './workflow-rows';

// A pass yields after this many transitions, so one long workflow cannot hold a worker slot forever.
const MAX_TRANSITIONS_PER_PASS = 200;

/**
 * Settles a control-plane step's run, only if the step is still `running` with the same attempt (an abort, a timeout
 * or another run may have settled it meanwhile).
 */
async function settleRun(tx: SqlExecutor, env: EngineEnv, request: RunRequest, outcome: RunOutcome): Promise<void> {
  const loaded = await lockActiveWorkflow(tx, request.key);
  if (!loaded || loaded.workflow.id !== request.workflowId) return;
  const step = loaded.steps.find((s) => s.stepId === request.stepId);
  if (step?.state !== 'running' || step.attempt !== request.attempt) return;
  const now = env.ctx.clock.now();
  if (outcome.kind === 'succeeded') await succeedStep(tx, env, loaded.workflow, step, outcome.result, now);
  if (outcome.kind === 'failed') await failStep(tx, env, loaded.workflow, loaded.steps, step, outcome.error, now);
}

/**
 * The `workflow` reconciler, keyed by node id (or workflow id): advances the key's active workflow one transition per
 * transaction with the workflow row locked, runs control-plane steps between transactions, and asks to be queued
 * again at the next moment it cares about (a command poll, a stepNotReady delay, a deadline). A succeeded workflow's
 * `hostConfig` resolves against `configUnits` (the built-ins by default).
 *
 * @example
 * ```ts
 * const module = { id: 'provision', reconcilers: { workflow: workflowReconciler(steps) } } satisfies ComputeModule;
 * ```
 */
export function workflowReconciler(
  steps: StepRegistry,
  configUnits: ConfigUnitRegistry = BUILTIN_CONFIG_UNIT_REGISTRY,
): Reconciler {
  return async (key: string, ctx: ModuleContext) => {
    const env: EngineEnv = { ctx, steps, configUnits };
    for (let i = 0; i < MAX_TRANSITIONS_PER_PASS; i += 1) {
      const decision = await ctx.sql.transaction(async (tx): Promise<Decision> => {
        const loaded = await lockActiveWorkflow(tx, key);
        return loaded ? advanceWorkflow(tx, env, loaded, ctx.clock.now()) : { kind: 'idle' };
      });
      if (decision.kind === 'idle') return undefined;
      if (decision.kind === 'wait')
        return { requeueAfterMs: Math.max(0, decision.until.getTime() - ctx.clock.now().getTime()) };
      if (decision.kind === 'run') {
        const outcome = await runControlPlaneStep(ctx, steps, decision.request);
        if (outcome.kind === 'abandoned') return { requeueAfterMs: 0 };
        if (outcome.kind === 'not-ready') {
          // Nothing to settle: the step stays running and runs again after the delay, never past its deadline.
          const at = Math.min(ctx.clock.now().getTime() + outcome.ms, decision.request.deadline.getTime());
          return { requeueAfterMs: Math.max(0, at - ctx.clock.now().getTime()) };
        }
        await ctx.sql.transaction((tx) => settleRun(tx, env, decision.request, outcome));
      }
    }
    return { requeueAfterMs: 0 };
  };
}
