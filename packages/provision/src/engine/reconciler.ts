import type { ModuleContext, Reconciler } from '@better-compute/core';
import { BUILTIN_CONFIG_UNIT_REGISTRY } from '../config-units/registry';
import type { ConfigUnitRegistry } from '../config-units/types';
import { advanceWorkflow } from './advance';
import { commitPlan, needsTransaction, readNeed } from './commit-plan';
import { WORKFLOW_WORK_KIND } from './constants';
import type { Decision, RunRequest } from './decision';
import { emptyPlan, isEmptyPlan, type Known, mergePlans, type Plan, PlanDraft } from './plan';
import { type RunOutcome, runControlPlaneStep } from './run-step';
import type { StepRegistry } from './step-registry';
import { TransientBackoff } from './transient-backoff';
import { type EngineEnv, failStep, succeedStep } from './transitions';
import { activeWorkflowPreloadSql, type LoadedWorkflow, preloadedWorkflow, readActiveWorkflow } from './workflow-rows';

// A pass yields after this many transitions, so one long workflow cannot hold a worker slot forever.
const MAX_TRANSITIONS_PER_PASS = 200;
// A transition needs at most a site agent, an agent session and a refused send before it decides.
const MAX_READS_PER_TRANSITION = 8;

/** A control-plane step's run that ended and waits to be settled. */
interface EndedRun {
  request: RunRequest;
  outcome: Extract<RunOutcome, { kind: 'succeeded' | 'failed' }>;
}

/**
 * Settles a control-plane step's run, only if the step is still `running` with the same attempt (an abort, a timeout
 * or another run may have settled it meanwhile).
 */
function settleRun(snapshot: LoadedWorkflow, run: EndedRun, now: Date): PlanDraft | undefined {
  const { request, outcome } = run;
  if (snapshot.workflow.id !== request.workflowId) return undefined;
  const draft = new PlanDraft(snapshot);
  const step = draft.steps.find((s) => s.stepId === request.stepId);
  if (step?.state !== 'running' || step.attempt !== request.attempt) return undefined;
  if (outcome.kind === 'succeeded') succeedStep(draft, step, outcome.result, now);
  else failStep(draft, step, outcome.error, now);
  return draft;
}

/** What planning without a transaction came to. */
type Planned =
  /** A decision and the plan to write for it; `before` is the plan and snapshot without the last transition. */
  | {
      kind: 'decided';
      decision: Decision;
      plan: Plan;
      next: LoadedWorkflow;
      before: { plan: Plan; state: LoadedWorkflow };
      transitions: number;
    }
  /** The next transition needs a transaction; `plan` is what comes before it, leaving `state`. */
  | { kind: 'needs-transaction'; plan: Plan; state: LoadedWorkflow; transitions: number };

/**
 * Plans from `snapshot` without a transaction: settles the ended run, then advances while nothing outside the workflow
 * is needed (skips, the next control-plane step started, a node step's command, the workflow finished).
 */
async function plan(
  env: EngineEnv,
  snapshot: LoadedWorkflow,
  run: EndedRun | undefined,
  budget: number,
  now: Date,
  stageCommands: boolean,
): Promise<Planned> {
  let acc = emptyPlan(snapshot.workflow);
  let state = snapshot;
  const settled = run ? settleRun(snapshot, run, now) : undefined;
  if (settled) {
    acc = settled.plan();
    state = settled.snapshot();
  }
  let transitions = 0;
  while (transitions < budget) {
    transitions += 1;
    const t = await advanceWorkflow(env, state, {}, now);
    if ('needs' in t || needsTransaction(t.plan) || (t.plan.command && !stageCommands)) {
      return { kind: 'needs-transaction', plan: acc, state, transitions: transitions - 1 };
    }
    const merged = mergePlans(acc, t.plan);
    if (t.decision.kind !== 'continue') {
      return {
        kind: 'decided',
        decision: t.decision,
        plan: merged,
        next: t.next,
        before: { plan: acc, state },
        transitions,
      };
    }
    acc = merged;
    state = t.next;
  }
  const before = { plan: acc, state };
  return { kind: 'decided', decision: { kind: 'continue' }, plan: acc, next: state, before, transitions };
}

/**
 * One transition in a transaction, for what a plan cannot do on its own. The planned writes go first, guarded like a
 * plan's (with none, just the revision bump): either way the workflow row is locked from there, so the snapshot is
 * current. The transition then decides on it, reading what it needs, and its plan is written. Undefined when the
 * snapshot was stale: nothing was written.
 */
async function transitionInTransaction(
  env: EngineEnv,
  revision: number,
  planned: Plan,
  state: LoadedWorkflow,
  now: Date,
): Promise<{ decision: Decision; next: LoadedWorkflow } | undefined> {
  return env.ctx.sql.transaction(async (tx) => {
    // The transaction is fenced already (the worker's executor checks the lease when it begins).
    const locked = await commitPlan(env, planned, now, { tx, guard: { revision } });
    if (locked.status !== 'committed') return undefined;
    const current = { ...state, workflow: { ...state.workflow, revision: locked.revision } };
    let known: Known = {};
    for (let reads = 0; reads < MAX_READS_PER_TRANSITION; reads += 1) {
      const t = await advanceWorkflow(env, current, known, now);
      if ('needs' in t) {
        known = { ...known, ...(await readNeed(tx, env, t.needs, now)) };
        continue;
      }
      if (isEmptyPlan(t.plan)) return { decision: t.decision, next: t.next };
      const written = await commitPlan(env, t.plan, now, { tx });
      if (written.status === 'refused') {
        known = { ...known, sendRefused: written.error };
        continue;
      }
      if (written.status !== 'committed') return undefined;
      t.next.workflow.revision = written.revision;
      return { decision: t.decision, next: t.next };
    }
    throw new Error(`workflow ${state.workflow.id}: a transition kept asking for reads`);
  });
}

function requeueAt(ctx: ModuleContext, at: number) {
  return { requeueAfterMs: Math.max(0, at - ctx.clock.now().getTime()) };
}

/**
 * The `workflow` reconciler, keyed by node id (or workflow id). A transition is what the engine decides on one
 * happening (a step's run ended, a command settled, a deadline passed, a verb): the step settled, the steps skipped
 * after it and the next one started, or the workflow finished. Transitions are decided in memory on the workflow as
 * the pass last read or wrote it (first as the worker's claim read it: its `preload`) and return plans; one place
 * writes them (`commitPlan`, through core's `commit`): one statement, which commits only while the workflow's revision
 * (bumped by every change, the verbs' locks among them) is the one it planned from, the node's labels are those it
 * evaluated `when` on, and the worker holds its shard; a stale plan is read again and planned anew. A node step's
 * command is inserted by that same statement, and a pass that ends waiting on it requeues its own work item there
 * too, so the worker has nothing to record. A transition that needs to read (a site agent, a command, an agent
 * session, the host config) or to write beyond the workflow (cancel a command, queue the owner, set the host config,
 * a command with policies) runs in a transaction with the workflow row locked. Control-plane steps run between,
 * outside any transaction; the reconciler asks to be queued again at the next moment it cares about (a command poll, a
 * stepNotReady delay, a deadline). A succeeded workflow's `hostConfig` resolves against `configUnits` (the built-ins
 * by default).
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
  const transient = new TransientBackoff();
  const reconcile = async (key: string, ctx: ModuleContext) => {
    const env: EngineEnv = { ctx, steps, configUnits };
    // What this pass last read or wrote of the key's active workflow (first what the claim preloaded, if it did);
    // undefined when it must read it again, null when there is none.
    let snapshot: LoadedWorkflow | null | undefined = preloadedWorkflow(ctx);
    let run: EndedRun | undefined;
    let transitions = 0;
    // Off for the rest of the pass once a command could not be written by one statement: it goes through enqueue.
    let stageCommands = true;
    while (transitions < MAX_TRANSITIONS_PER_PASS) {
      if (snapshot === undefined) snapshot = (await readActiveWorkflow(ctx.sql, key)) ?? null;
      if (snapshot === null) return undefined;
      const now = ctx.clock.now();
      const revision = snapshot.workflow.revision;
      const planned = await plan(env, snapshot, run, MAX_TRANSITIONS_PER_PASS - transitions, now, stageCommands);
      let decided: { decision: Decision; next: LoadedWorkflow } | undefined;
      let requeueWritten = false;
      let inTransaction = planned.kind === 'needs-transaction' ? planned : undefined;
      if (planned.kind === 'decided' && isEmptyPlan(planned.plan)) {
        decided = { decision: planned.decision, next: planned.next };
      } else if (planned.kind === 'decided') {
        // A pass that ends waiting writes its own requeue with the transition (one statement fewer per agent step).
        const { decision } = planned;
        const requeue =
          decision.kind === 'wait' && ctx.item?.kind === WORKFLOW_WORK_KIND && ctx.item.key === key
            ? decision.until
            : undefined;
        const written = await commitPlan(env, planned.plan, now, {
          guard: { revision },
          ...(requeue ? { requeue } : {}),
        });
        if (written.status === 'committed') {
          planned.next.workflow.revision = written.revision;
          decided = { decision, next: planned.next };
          requeueWritten = written.requeued;
        } else if (written.status !== 'stale') {
          // The command could not be written by one statement (policies, its key taken, refused): nothing was
          // written; what came before it is written in a transaction, and the command sent there.
          stageCommands = false;
          const { before } = planned;
          inTransaction = { kind: 'needs-transaction', ...before, transitions: planned.transitions - 1 };
        }
      }
      if (inTransaction) {
        try {
          decided = await transitionInTransaction(env, revision, inTransaction.plan, inTransaction.state, now);
        } catch (error) {
          snapshot = undefined;
          throw error;
        }
      }
      if (decided === undefined) {
        // Stale: something changed the workflow (a verb, the node's labels) since it was read. An ended run is
        // settled against the workflow as it is now, or not at all if it no longer runs. It counts against the
        // pass's budget, so a workflow changed without pause cannot hold the worker.
        snapshot = undefined;
        transitions += 1;
        continue;
      }
      snapshot = decided.next;
      run = undefined;
      transitions += Math.max(1, (inTransaction ?? planned).transitions);
      const { decision } = decided;
      if (decision.kind === 'idle') return undefined;
      if (decision.kind === 'wait') {
        const result = requeueAt(ctx, decision.until.getTime());
        return requeueWritten ? { ...result, requeueWritten: true } : result;
      }
      if (decision.kind === 'run') {
        const { request } = decision;
        const attemptKey = `${request.workflowId}:${request.stepId}:${request.attempt}`;
        const outcome = await runControlPlaneStep(ctx, steps, request, () => transient.next(attemptKey));
        if (outcome.kind === 'abandoned') return { requeueAfterMs: 0 };
        if (outcome.kind !== 'transient') transient.clear(attemptKey);
        if (outcome.kind === 'not-ready' || outcome.kind === 'transient') {
          // Nothing to settle: the step stays running and runs again after the delay, never past its deadline.
          return requeueAt(ctx, Math.min(ctx.clock.now().getTime() + outcome.ms, request.deadline.getTime()));
        }
        run = { request, outcome };
      }
    }
    return { requeueAfterMs: 0 };
  };
  // The claim reads the workflow with the item, so a pass on a command's result starts planning at once.
  return Object.assign(reconcile, { preload: { sql: activeWorkflowPreloadSql } });
}
