import type { ComputeError, ModuleContext, Reconciler } from '@better-compute/core';
import { type CommandStaging, type EventStaging, OPEN_COMMAND_STATES } from '@better-compute/core/kernel';
import { BUILTIN_CONFIG_UNIT_REGISTRY } from '../config-units/registry';
import type { ConfigUnitRegistry } from '../config-units/types';
import type { DriverTarget, StepPreloads, WorkflowPreload } from '../define/types';
import type { WorkflowEndWrite } from '../define/workflow-end-write';
import { chainNextStart } from './chained-start';
import { answersAfterRun, claimAnswersOf } from './claim-answers';
import { commitPlan } from './commit-plan';
import { ACTIVE_STATES_SQL, ENGINE_DEFAULTS, WORKFLOW_WORK_KIND } from './constants';
import type { RunRequest } from './decision';
import { stageEndWrite } from './end-write';
import { runReadsAfter } from './foreseen-writes';
import { isEmptyPlan } from './plan';
import { type EndedRun, type Planned, planPass, writePass } from './plan-pass';
import { RunGate, type StartWriter } from './run-gate';
import { runControlPlaneStep } from './run-step';
import type { StepRegistry } from './step-registry';
import { TransientBackoff } from './transient-backoff';
import type { EngineEnv } from './transitions';
import {
  activeWorkflowPreloadSql,
  type LoadedWorkflow,
  preloadedWorkflow,
  readActiveWorkflow,
  type StepReads,
} from './workflow-rows';

// A pass yields after this many transitions, so one long workflow cannot hold a worker slot forever.
const MAX_TRANSITIONS_PER_PASS = 200;

// The open command states as an SQL list, from core's one definition of them.
const OPEN_STATES_SQL = `(${OPEN_COMMAND_STATES.map((s) => `'${s}'`).join(', ')})`;

/**
 * The `workflow` reconciler's park (core's `ReconcilerPark`): a waiting agent step's look, made by the worker's claim
 * in SQL, finds nothing to do while the workflow is at the revision the pass left it at and the step's command is
 * still open before its `notAfter`, exactly what the pass's look would have found; the item is then looked at again
 * `workflowPollMs` later, until the step's deadline, without a pass.
 *
 * @example
 * ```ts
 * commandParkSql('w.park_on', '$1::timestamptz'); // EXISTS (SELECT 1 FROM workflows wf JOIN commands c …)
 * ```
 */
export function commandParkSql(on: string, now: string): string {
  return `EXISTS (SELECT 1 FROM workflows wf JOIN commands c ON c.id = ${on}->>'commandId'
    WHERE wf.id = ${on}->>'workflowId' AND wf.revision = (${on}->>'revision')::bigint
      AND wf.state IN ${ACTIVE_STATES_SQL}
      AND c.state IN ${OPEN_STATES_SQL} AND c.not_after > ${now})`;
}

// A run whose send the queue refused ends as awaitCommand would have ended it: failed with the refusal.
function refusedRun(error: ComputeError): EndedRun['outcome'] {
  const reason = typeof error.details.reason === 'string' ? { reason: error.details.reason } : {};
  return { kind: 'failed', error: { code: error.code, message: error.message, ...reason } };
}

/**
 * What a run may take from the claim's reads: for the attempt that was running when the claim read, its commands (when
 * the claim read them); for
 * an attempt this pass started since (the pass wrote every change after the claim's read, so any other running
 * attempt is its own), none; the modules' reads either way. Undefined once the pass read the workflow again.
 */
function runPreloads(
  reads: { stepReads: StepReads; running: ReadonlyMap<string, number> } | undefined,
  request: { workflowId: string; stepId: string; attempt: number },
): StepPreloads | undefined {
  if (!reads) return undefined;
  if (reads.running.get(request.stepId) !== request.attempt) return { commands: [], reads: reads.stepReads.reads };
  // Too many or too large to read with the claim: the run looks its commands up itself.
  if (!reads.stepReads.commands) return { reads: reads.stepReads.reads };
  // The claim read only the running attempts' commands: those of this step are this attempt's.
  const commands = reads.stepReads.commands.filter((c) => c.stepId === request.stepId);
  return { commands, reads: reads.stepReads.reads };
}

function claimReads(snapshot: LoadedWorkflow | null | undefined) {
  if (!snapshot?.stepReads) return undefined;
  const running = new Map(snapshot.steps.filter((s) => s.state === 'running').map((s) => [s.stepId, s.attempt]));
  return { stepReads: snapshot.stepReads, running };
}

/** How a run ended for the reconciler: a value to return, a run to settle, or superseded (see `GateFinish`). */
type RunEnd = { kind: 'return'; value: ReconcileResult } | { kind: 'settle'; run: EndedRun } | { kind: 'superseded' };

type ReconcileResult = { requeueAfterMs: number; requeueWritten?: true };

/**
 * A relaying step's start that waits for its run (see `RunGate`): when the pass decided to run a step that declares
 * what it `sends`, and what it planned (the step's `running` mark, what came before it) can be written by one statement
 * with the run's sends. Until its first statement such a run only decides what to relay (what it sends is held), so
 * its start is written with its send. Other steps are marked `running` before they run, as always. The writer writes
 * the plan at the revision it was planned from; alone it falls back to a transaction when the one statement cannot
 * carry it.
 */
function deferredStart(env: EngineEnv, planned: Planned, revision: number, now: Date) {
  if (planned.kind !== 'decided' || planned.decision.kind !== 'run' || planned.reread) return undefined;
  const definition = env.steps.get(planned.decision.request.action);
  if (definition?.runsOn !== 'control-plane' || !definition.sends?.length) return undefined;
  const { plan } = planned;
  const { ctx } = env;
  const staging = ctx.commands as Partial<CommandStaging>;
  if (isEmptyPlan(plan) || !staging.stage || !(ctx.events as Partial<EventStaging>).stage || plan.owner) {
    return undefined;
  }
  const writer: StartWriter = async (extra) => {
    const written = await commitPlan(env, plan, now, { guard: { revision }, ...extra });
    if (written.status !== 'needs-transaction' || extra.sends || extra.requeue) return written;
    return ctx.sql.transaction((tx) => commitPlan(env, plan, now, { tx, guard: { revision } }));
  };
  return { request: planned.decision.request, writer, next: planned.next, transitions: planned.transitions };
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
 * too, so the worker has nothing to record. A transition that needs to read a command or the host config, or to
 * write beyond the workflow (cancel a command, set the host config, a command with policies), runs in a transaction
 * with the workflow row locked; a site agent, an agent's session and a driver target's fields are read before the
 * statement, or taken from the claim right after it. A workflow's end carries its owner's end write when the owner
 * registered one (`WorkflowEndWrite`), instead of queuing the owner. Control-plane steps run between, outside any
 * transaction; the reconciler asks to be queued again at the next moment it cares about (a command poll, a
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
  driverTargets: readonly DriverTarget[] = [],
  workflowPreloads: readonly WorkflowPreload[] = [],
  endWrites: ReadonlyMap<string, WorkflowEndWrite> = new Map(),
): Reconciler {
  const transient = new TransientBackoff();
  const reconcile = async (key: string, ctx: ModuleContext) => {
    const env: EngineEnv = { ctx, steps, configUnits, driverTargets, endWrites, workflowPreloads };
    // What this pass last read or wrote of the key's active workflow (first what the claim preloaded, if it did);
    // undefined when it must read it again, null when there is none.
    let snapshot: LoadedWorkflow | null | undefined = preloadedWorkflow(ctx);
    // What the claim read for the runs, good while every change since was this pass's own (no read again).
    let reads = claimReads(snapshot);
    // What the claim read that answers the engine's plain reads (see `answersAfterRun` once the pass ran a step).
    let claim = claimAnswersOf(snapshot);
    const claimedAt = performance.now();
    let run: EndedRun | undefined;
    let transitions = 0;
    // Off for the rest of the pass once a command could not be written by one statement: it goes through enqueue.
    let stageCommands = true;
    // Off for the rest of the pass once a statement with an owner's end write was stale: its requires may be what
    // failed, and the workflow's end must not wait on them (the owner is queued instead).
    let endWriteRefused = false;
    const ownItem = ctx.item?.kind === WORKFLOW_WORK_KIND && ctx.item.key === key;
    // Runs a control-plane step and ends it: what the reconciler returns, the run to settle, or superseded (a deferred
    // start found the workflow changed: nothing of the run was written).
    const runStep = async (request: RunRequest, gate: RunGate): Promise<RunEnd> => {
      const attemptKey = `${request.workflowId}:${request.stepId}:${request.attempt}`;
      const preloads = runPreloads(reads, request);
      const outcome = await runControlPlaneStep(ctx, steps, request, () => transient.next(attemptKey), gate, preloads);
      claim = answersAfterRun(claim, performance.now() - claimedAt);
      if (outcome.kind === 'abandoned' || outcome.kind === 'transient') gate.close();
      // A worker that stops writes nothing more: a start still deferred stays unwritten, and the step as it was.
      if (outcome.kind === 'abandoned') return { kind: 'return', value: { requeueAfterMs: 0 } };
      if (outcome.kind !== 'transient') transient.clear(attemptKey);
      if (outcome.kind === 'not-ready' || outcome.kind === 'transient') {
        // Nothing to settle: the step stays running and runs again after the delay, never past its deadline. Its
        // last send, held, is written with that requeue when the pass's item is the workflow's own.
        const at = Math.min(ctx.clock.now().getTime() + outcome.ms, request.deadline.getTime());
        const sent = await gate.finish(ownItem ? new Date(at) : undefined);
        if (sent === 'superseded') return { kind: 'superseded' };
        if (typeof sent === 'object') return { kind: 'settle', run: { request, outcome: refusedRun(sent.refused) } };
        const value = { ...requeueAt(ctx, at), ...(sent === 'requeued' ? { requeueWritten: true as const } : {}) };
        return { kind: 'return', value };
      }
      // A send held by a run that then ended is written before the run is settled; a refused one fails it.
      const sent = await gate.finish(undefined);
      if (sent === 'superseded') return { kind: 'superseded' };
      const ended = typeof sent === 'object' && outcome.kind === 'succeeded' ? refusedRun(sent.refused) : outcome;
      return { kind: 'settle', run: { request, outcome: ended } };
    };
    // A step whose start waits for its run (see RunGate): the start is written by the run's first write, or with its
    // held send and requeue. Superseded when the start found the workflow changed: as a stale plan (below), the ended
    // run before it is settled against the workflow as it is now. Else the pass goes on from the step's start, unless
    // it ends here (`value`).
    const runDeferred = async (start: {
      request: RunRequest;
      writer: StartWriter;
      next: LoadedWorkflow;
      transitions: number;
    }): Promise<{ value: ReconcileResult | undefined } | 'superseded' | 'started'> => {
      const gate = new RunGate(ctx, start.writer);
      const ended = await runStep(start.request, gate);
      const started = gate.started;
      if (ended.kind === 'superseded' || started === 'stale' || started === undefined) {
        if (ended.kind === 'return' && started === undefined) return { value: ended.value };
        snapshot = undefined;
        if (run?.outcome.kind === 'succeeded' && run.outcome.with) run = undefined;
        transitions += 1;
        return 'superseded';
      }
      snapshot = start.next;
      snapshot.workflow.revision = started.revision;
      transitions += Math.max(1, start.transitions);
      if (ended.kind === 'return') return { value: ended.value };
      run = ended.run;
      return 'started';
    };
    while (transitions < MAX_TRANSITIONS_PER_PASS) {
      if (snapshot === undefined) {
        reads = undefined;
        claim = undefined;
        snapshot = (await readActiveWorkflow(ctx.sql, key)) ?? null;
      }
      if (snapshot === null) return undefined;
      const now = ctx.clock.now();
      const budget = MAX_TRANSITIONS_PER_PASS - transitions;
      const planned = await planPass(env, snapshot, run, budget, now, stageCommands, claim);
      // What the claim read for runs, as the settled run's writes with its result leave it (none when they cannot say:
      // a run after them reads for itself, once they committed).
      if (run && planned.plan.with && reads) {
        const after = runReadsAfter(reads.stepReads.reads, planned.plan.with);
        reads = after ? { ...reads, stepReads: { ...reads.stepReads, reads: after } } : undefined;
      }
      const deferred = deferredStart(env, planned, snapshot.workflow.revision, now);
      if (deferred) {
        const ran = await runDeferred(deferred);
        if (typeof ran === 'object') return ran.value;
        continue;
      }
      // A pass that ends waiting writes its own requeue with the transition (one statement fewer per agent step).
      const waits = planned.kind === 'decided' && planned.decision.kind === 'wait' ? planned.decision.until : undefined;
      const requeue = ownItem ? waits : undefined;
      // A pass that ends idle (the workflow ended, say) deletes its own item with its last statement.
      const done = ownItem && planned.kind === 'decided' && planned.decision.kind === 'idle';
      const endReads = reads?.stepReads.reads ?? {};
      let endWrite: Parameters<typeof writePass>[6] = endWriteRefused ? undefined : { reads: endReads };
      if (!endWriteRefused && done) {
        // The end write staged here, so the next workflow it starts on this key can go on in this pass.
        const end = await stageEndWrite(env, planned.plan, endReads, now);
        const chained = end && (await chainNextStart(env, planned, snapshot, end, endReads, now, claim));
        if (chained) {
          reads = { stepReads: { commands: [], reads: chained.reads }, running: new Map() };
          const ran = await runDeferred(chained);
          if (typeof ran === 'object') return ran.value;
          // Superseded, nothing was written: the workflow is read again and ended without the end write.
          if (ran === 'superseded') endWriteRefused = true;
          continue;
        }
        endWrite = { staged: end };
      }
      let written: Awaited<ReturnType<typeof writePass>>;
      try {
        written = await writePass(env, planned, snapshot.workflow.revision, now, requeue, done, endWrite);
      } catch (error) {
        snapshot = undefined;
        throw error;
      }
      stageCommands &&= written.stageCommands;
      if (written.kind === 'stale') {
        endWriteRefused ||= written.endWrite === true;
        // Stale: something changed the workflow (a verb, the node's labels) since it was read. An ended run is
        // settled against the workflow as it is now, or not at all if it no longer runs. It counts against the
        // pass's budget, so a workflow changed without pause cannot hold the worker. A run that writes with its
        // result is run again instead: what it wrote from may be what changed (its writes' requires failed).
        snapshot = undefined;
        if (run?.outcome.kind === 'succeeded' && run.outcome.with) run = undefined;
        transitions += 1;
        continue;
      }
      snapshot = written.reread ? undefined : written.next;
      run = undefined;
      transitions += Math.max(1, written.transitions);
      const { decision, requeueWritten } = written;
      if (decision.kind === 'idle') {
        if (written.doneWritten) return { doneWritten: true as const };
        // The owner's end write started the key's next workflow: the statement requeued this item for it.
        return requeueWritten ? { requeueAfterMs: 0, requeueWritten: true } : undefined;
      }
      if (decision.kind === 'wait') {
        const result = requeueAt(ctx, decision.until.getTime());
        if (requeueWritten) return { ...result, requeueWritten: true };
        if (!decision.command) return result;
        // The looks while the command stays open are the claim's (see commandParkSql): no pass until it settles, the
        // workflow changes, the item is woken, or the step's deadline comes.
        const on = {
          workflowId: written.next.workflow.id,
          revision: written.next.workflow.revision,
          commandId: decision.command.id,
        };
        return { ...result, park: { on, everyMs: ENGINE_DEFAULTS.workflowPollMs, until: decision.command.deadline } };
      }
      if (decision.kind === 'run') {
        const ended = await runStep(decision.request, new RunGate(ctx));
        if (ended.kind === 'return') return ended.value;
        // Without a deferred start nothing supersedes the run: its `running` mark is written.
        if (ended.kind === 'settle') run = ended.run;
      }
    }
    return { requeueAfterMs: 0 };
  };
  // The claim reads the workflow with the item, so a pass on a command's result starts planning at once, with what
  // its step's run reads (its commands, the modules' workflow preloads); and it makes the looks of a waiting agent
  // step whose command is still open itself.
  const preload = { sql: (key: string, now: string) => activeWorkflowPreloadSql(key, now, workflowPreloads) };
  return Object.assign(reconcile, { preload, park: { sql: commandParkSql } });
}
