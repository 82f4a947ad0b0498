import { isSqlError, leaseOf, type ModuleContext, type Reconciler } from '@better-compute/core';
import { BUILTIN_CONFIG_UNIT_REGISTRY } from '../config-units/registry';
import type { ConfigUnitRegistry } from '../config-units/types';
import { advanceWorkflow } from './advance';
import { WORKFLOW_WORK_KIND } from './constants';
import type { Decision, RunRequest } from './decision';
import { flushWrites } from './flush-writes';
import { type RunOutcome, runControlPlaneStep } from './run-step';
import { NeedsTransaction, StagedWrites } from './staged-writes';
import type { StepRegistry } from './step-registry';
import { TransientBackoff } from './transient-backoff';
import { type EngineEnv, failStep, succeedStep } from './transitions';
import { activeWorkflowPreloadSql, type LoadedWorkflow, preloadedWorkflow, readActiveWorkflow } from './workflow-rows';

// A pass yields after this many transitions, so one long workflow cannot hold a worker slot forever.
const MAX_TRANSITIONS_PER_PASS = 200;

/** A control-plane step's run that ended and waits to be settled. */
interface EndedRun {
  request: RunRequest;
  outcome: Extract<RunOutcome, { kind: 'succeeded' | 'failed' }>;
}

/**
 * Settles a control-plane step's run, only if the step is still `running` with the same attempt (an abort, a timeout
 * or another run may have settled it meanwhile).
 */
async function settleRun(staged: StagedWrites, env: EngineEnv, loaded: LoadedWorkflow, run: EndedRun, now: Date) {
  const { request, outcome } = run;
  if (loaded.workflow.id !== request.workflowId) return;
  const step = loaded.steps.find((s) => s.stepId === request.stepId);
  if (step?.state !== 'running' || step.attempt !== request.attempt) return;
  if (outcome.kind === 'succeeded') await succeedStep(staged, env, loaded.workflow, step, outcome.result, now);
  else await failStep(staged, env, loaded.workflow, loaded.steps, step, outcome.error, now);
}

/** What a plan made without a transaction came to: a decision, or a transition that needs one. */
type Planned = { decision: Decision | 'needs-transaction'; transitions: number };

/**
 * Plans from `loaded` without a transaction: settles the ended run, then advances while nothing outside the workflow
 * is needed (skips, the next control-plane step started, the workflow finished), staging every write.
 */
async function plan(
  staged: StagedWrites,
  env: EngineEnv,
  loaded: LoadedWorkflow,
  run: EndedRun | undefined,
  budget: number,
  now: Date,
): Promise<Planned> {
  if (run) await settleRun(staged, env, loaded, run, now);
  let transitions = 0;
  try {
    while (transitions < budget) {
      transitions += 1;
      const decision = await advanceWorkflow(staged, env, loaded, now);
      if (decision.kind !== 'continue') return { decision, transitions };
    }
    return { decision: { kind: 'continue' }, transitions };
  } catch (error) {
    if (error instanceof NeedsTransaction) return { decision: 'needs-transaction', transitions: transitions - 1 };
    throw error;
  }
}

/**
 * One transition in a transaction, for what a plan cannot do on its own. The planned writes go first, guarded like
 * a plan's (with none, just the revision bump): either way the workflow row is locked from there, so the snapshot is
 * current, and the transition runs on it. Undefined when the snapshot was stale: nothing was written.
 */
async function transitionInTransaction(
  env: EngineEnv,
  snapshot: LoadedWorkflow,
  planned: StagedWrites,
  now: Date,
): Promise<Decision | undefined> {
  return env.ctx.sql.transaction(async (tx) => {
    // The transaction is fenced already (the worker's executor checks the lease when it begins).
    const locked = await flushWrites(tx, planned, now, { revision: snapshot.workflow.revision, lease: undefined });
    if (locked === undefined) return undefined;
    snapshot.workflow.revision = locked;
    const staged = new StagedWrites(snapshot.workflow, tx);
    const decision = await advanceWorkflow(staged, env, snapshot, now);
    if (!staged.empty) snapshot.workflow.revision = (await flushWrites(tx, staged, now, undefined)) as number;
    return decision;
  });
}

function requeueAt(ctx: ModuleContext, at: number) {
  return { requeueAfterMs: Math.max(0, at - ctx.clock.now().getTime()) };
}

/**
 * The `workflow` reconciler, keyed by node id (or workflow id). A transition is what the engine decides on one
 * happening (a step's run ended, a command settled, a deadline passed, a verb): the step settled, the steps skipped
 * after it and the next one started, or the workflow finished. It plans from the workflow as it last read or wrote it
 * (first as the worker's claim read it: its `preload`) and writes it in one statement, which commits only while the
 * workflow's revision (bumped by every change, the verbs' locks among them) is the one it planned from, the node's
 * labels are those it evaluated `when` on, and the worker holds its shard; a stale plan is read again and planned
 * anew. A node step's command is inserted by that same statement, and a pass that ends waiting on it requeues its own
 * work item there too (`requeueItemSql`), so the worker has nothing to record. What a plan cannot do alone (send a
 * site step's command, read a command, queue the owner, set the host config) runs in a transaction with the workflow
 * row locked. Control-plane steps run between, outside any transaction; the reconciler asks to be queued again at the
 * next moment it cares about (a command poll, a stepNotReady delay, a deadline). A succeeded workflow's `hostConfig`
 * resolves against `configUnits` (the built-ins by default).
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
    const lease = leaseOf(ctx.sql);
    // What this pass last read or wrote of the key's active workflow (first what the claim preloaded, if it did);
    // undefined when it must read it again, null when there is none.
    let snapshot: LoadedWorkflow | null | undefined = preloadedWorkflow(ctx);
    let run: EndedRun | undefined;
    let transitions = 0;
    // Off for the rest of the pass once a staged command met one already under its key: enqueue then finds that one.
    let stageCommands = true;
    while (transitions < MAX_TRANSITIONS_PER_PASS) {
      if (snapshot === undefined) snapshot = (await readActiveWorkflow(ctx.sql, key)) ?? null;
      if (snapshot === null) return undefined;
      const now = ctx.clock.now();
      const staged = new StagedWrites(snapshot.workflow, undefined, stageCommands);
      const planned = await plan(staged, env, snapshot, run, MAX_TRANSITIONS_PER_PASS - transitions, now);
      let decision: Decision | undefined;
      let requeueWritten = false;
      if (planned.decision === 'needs-transaction') {
        try {
          decision = await transitionInTransaction(env, snapshot, staged, now);
        } catch (error) {
          snapshot = undefined;
          throw error;
        }
      } else if (staged.empty) {
        decision = planned.decision;
      } else {
        let revision: number | undefined;
        // A pass that ends waiting writes its own requeue with the transition (one statement fewer per agent step).
        const decided = planned.decision;
        const requeue =
          decided.kind === 'wait' && ctx.item?.kind === WORKFLOW_WORK_KIND && ctx.item.key === key
            ? { kind: WORKFLOW_WORK_KIND, key, at: decided.until }
            : undefined;
        try {
          revision = await flushWrites(ctx.sql, staged, now, {
            revision: snapshot.workflow.revision,
            lease,
            ...(requeue ? { requeue } : {}),
          });
        } catch (error) {
          if (!staged.command || !isSqlError(error, 'unique-violation')) throw error;
          // Nothing was written; plan again, sending through enqueue.
          stageCommands = false;
        }
        if (revision !== undefined) snapshot.workflow.revision = revision;
        decision = revision === undefined ? undefined : planned.decision;
        requeueWritten = requeue !== undefined && revision !== undefined;
      }
      if (decision === undefined) {
        // Stale (or a staged command's key was taken): something changed the workflow (a verb, the node's labels)
        // since it was read. An ended run is settled against the workflow as it is now, or not at all if it no
        // longer runs. It counts against the pass's budget, so a workflow changed without pause cannot hold the
        // worker.
        snapshot = undefined;
        transitions += 1;
        continue;
      }
      run = undefined;
      transitions += Math.max(1, planned.transitions);
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
          return requeueAt(ctx, Math.min(ctx.clock.now().getTime() + outcome.ms, decision.request.deadline.getTime()));
        }
        run = { request: decision.request, outcome };
      }
    }
    return { requeueAfterMs: 0 };
  };
  // The claim reads the workflow with the item, so a pass on a command's result starts planning at once.
  return Object.assign(reconcile, { preload: { sql: activeWorkflowPreloadSql } });
}
