import type { StagedEndWrite, WorkflowEnd } from '../define/workflow-end-write';
import { advanceWorkflow } from './advance';
import { answerFromClaim, type ClaimAnswers } from './claim-answers';
import { commitPlan, needsTransaction, readNeed } from './commit-plan';
import type { Decision, RunRequest } from './decision';
import { afterEndWrite, stageEndWrite } from './end-write';
import { foreseenWrites, withNodeLabels } from './foreseen-writes';
import {
  emptyPlan,
  isEmptyPlan,
  type Known,
  mergePlans,
  type Need,
  type Plan,
  PlanDraft,
  type SessionCheck,
} from './plan';
import type { RunOutcome } from './run-step';
import type { EngineEnv } from './transitions';
import { failStep, succeedStep } from './transitions';
import type { LoadedWorkflow } from './workflow-rows';

// A transition needs at most a site agent, an agent session and a refused send before it decides.
const MAX_READS_PER_TRANSITION = 8;

/**
 * What a transition may read without a transaction, before the plan's one statement: rows that statement does not
 * write (a site agent's session, an agent's session, what a driver target adds), read at read-committed as they would
 * be in the transaction, where nothing locks them either. The workflow is held as the transaction's row lock held it,
 * by the statement's revision guard: a plan decided on a workflow that changed meanwhile is stale and decided anew. A
 * command's read (which expires it) and the host config (which locks the node) still take a transaction.
 */
const PLAIN_READS: ReadonlySet<Need['kind']> = new Set(['site-agent', 'agent-session', 'driver-target']);

/**
 * One transition, with the plain reads it needs made on the way (see `PLAIN_READS`) when `read`; what it needs beyond
 * them comes back as its need.
 */
async function advanceWithPlainReads(
  env: EngineEnv,
  state: LoadedWorkflow,
  read: boolean,
  now: Date,
  claim: ClaimAnswers | undefined,
) {
  let known: Known = {};
  // A session the claim read before a control-plane step ran: the plan's statement checks it is still current.
  let sessionCheck: SessionCheck | undefined;
  for (let reads = 0; ; reads += 1) {
    const t = await advanceWorkflow(env, state, known, now);
    if (!read || !('needs' in t) || !PLAIN_READS.has(t.needs.kind)) {
      return sessionCheck && 'plan' in t ? { ...t, plan: { ...t.plan, sessionCheck } } : t;
    }
    if (reads === MAX_READS_PER_TRANSITION) {
      throw new Error(`workflow ${state.workflow.id}: a transition kept asking for reads`);
    }
    const answered = claim ? answerFromClaim(env, claim, t.needs) : undefined;
    if (answered && t.needs.kind === 'agent-session' && claim?.afterRun) {
      sessionCheck = { nodeId: t.needs.nodeId, session: answered.session ?? null };
    }
    known = { ...known, ...(answered ?? (await readNeed(env.ctx.sql, env, t.needs, now))) };
  }
}

/** A control-plane step's run that ended and waits to be settled. */
export interface EndedRun {
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
export type Planned =
  /** A decision and the plan to write for it; `before` is the plan and snapshot without the last transition. */
  | {
      kind: 'decided';
      decision: Decision;
      plan: Plan;
      next: LoadedWorkflow;
      before: { plan: Plan; state: LoadedWorkflow };
      transitions: number;
      /**
       * The plan writes a run's writes with its result and stops before a transition that would decide on what they
       * may have changed (a `when` on the node's labels) or need a transaction: the pass reads the workflow again.
       */
      reread?: true;
    }
  /** The next transition needs a transaction; `plan` is what comes before it, leaving `state`. */
  | { kind: 'needs-transaction'; plan: Plan; state: LoadedWorkflow; transitions: number };

/**
 * Plans from `snapshot` without a transaction: settles the ended run, then advances while nothing but plain reads
 * (see `PLAIN_READS`, answered by `claim` when it can) is needed (skips, the next control-plane step started, an
 * agent step's command with the site agent and driver fields it goes with, a rejoin looked at, the workflow
 * finished).
 *
 * @example
 * ```ts
 * const planned = await planPass(env, snapshot, run, 200, ctx.clock.now(), true);
 * ```
 */
export async function planPass(
  env: EngineEnv,
  snapshot: LoadedWorkflow,
  run: EndedRun | undefined,
  budget: number,
  now: Date,
  stageCommands: boolean,
  claim?: ClaimAnswers,
): Promise<Planned> {
  let acc = emptyPlan(snapshot.workflow);
  let state = snapshot;
  const settled = run ? settleRun(snapshot, run, now) : undefined;
  // What the run writes with its result (node labels among it, perhaps): what follows must not decide on the snapshot's,
  // unless the writes say what they leave (see `foreseenWrites`).
  const withResult = settled && run?.outcome.kind === 'succeeded' ? run.outcome.with : undefined;
  const foreseen = withResult ? foreseenWrites(withResult) : undefined;
  // A write whose outcome the pass cannot foresee: nothing is read or decided on labels before it commits.
  const blind = withResult !== undefined && foreseen === undefined;
  if (settled) {
    acc = withResult ? { ...settled.plan(), with: withResult } : settled.plan();
    state = settled.snapshot();
    if (foreseen?.nodeLabels) state = withNodeLabels(state, foreseen.nodeLabels);
  }
  let transitions = 0;
  while (transitions < budget) {
    transitions += 1;
    // After a run whose writes the pass cannot foresee, nothing is read before they commit: the pass reads again.
    const t = await advanceWithPlainReads(env, state, !blind, now, claim);
    const needs = 'needs' in t || needsTransaction(t.plan) || (t.plan.command && !stageCommands);
    if (blind && (needs || t.plan.readsLabels)) {
      const before = { plan: acc, state };
      const decision = { kind: 'continue' } as const;
      return { kind: 'decided', decision, plan: acc, next: state, before, transitions: transitions - 1, reread: true };
    }
    if (needs) {
      return { kind: 'needs-transaction', plan: acc, state, transitions: transitions - 1 };
    }
    // A `when` decided on the labels the run's write leaves is held by that write's own guard (it commits only on the
    // node's row as it read it), in this same statement: the statement does not check them against the old ones.
    const merged = mergePlans(acc, foreseen?.nodeLabels ? { ...t.plan, readsLabels: false } : t.plan);
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
      // The row is locked, but the node's labels are not: a `when` decided here on the snapshot's labels (a step's
      // run may have written them since the pass read them) is checked like a plan's without a transaction.
      const written = await commitPlan(env, t.plan, now, { tx, guard: { revision: current.workflow.revision } });
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

/** What writing a pass's plan came to: the decision and the snapshot after it, or stale (nothing written). */
export type PassWrite =
  | {
      kind: 'written';
      decision: Decision;
      next: LoadedWorkflow;
      requeueWritten: boolean;
      transitions: number;
      /** The pass must read the workflow again before it plans on (see `Planned`'s `reread`). */
      reread?: true;
      /** The statement deleted the pass's own work item (`done`, for a pass that ends idle). */
      doneWritten?: true;
    }
  | {
      kind: 'stale';
      stageCommands: boolean;
      /** The stale statement carried an owner's end write (whose requires may be what failed). */
      endWrite?: true;
    };

/**
 * Writes what {@link planPass} planned from the snapshot at `revision`: nothing for an empty plan; one statement (which
 * requeues the pass's own item `requeue` when the pass ends waiting, and carries the owner's end write, staged with
 * `endWrite.reads`, when the plan ends the workflow) when it can; else, or when its command cannot be written by one
 * statement, a transaction for the next transition. `stageCommands` comes back false once a command had to go
 * through `enqueue`.
 *
 * @example
 * ```ts
 * const written = await writePass(env, planned, revision, now, requeueOf(planned));
 * ```
 */
export async function writePass(
  env: EngineEnv,
  planned: Planned,
  revision: number,
  now: Date,
  requeue: Date | undefined,
  done = false,
  endWrite?: { reads: WorkflowEnd['reads'] } | { staged: StagedEndWrite | undefined },
): Promise<PassWrite & { stageCommands: boolean }> {
  let inTransaction = planned.kind === 'needs-transaction' ? planned : undefined;
  let stageCommands = true;
  if (planned.kind === 'decided') {
    const { decision, next } = planned;
    if (isEmptyPlan(planned.plan)) {
      return {
        kind: 'written',
        decision,
        next,
        requeueWritten: false,
        transitions: planned.transitions,
        stageCommands,
      };
    }
    // Staged by the pass already (when it looked at chaining the next workflow's start), or here.
    const end =
      endWrite && 'staged' in endWrite
        ? endWrite.staged
        : endWrite
          ? await stageEndWrite(env, planned.plan, endWrite.reads, now)
          : undefined;
    // The workflow the end write starts may be the pass's own item (a node's next workflow has the node's key): the
    // statement requeues that item for now instead of deleting it, and the pass's worker claims it again.
    const item = env.ctx.item;
    const ownWake = end?.wake !== undefined && end.wake.kind === item?.kind && end.wake.key === item.key;
    const written = await commitPlan(env, planned.plan, now, {
      guard: { revision },
      ...(ownWake ? { requeue: now } : requeue ? { requeue } : {}),
      ...(done && !ownWake ? { done } : {}),
      ...(end ? { end: ownWake ? { ...end, wake: undefined } : end } : {}),
    });
    // Stale with an end write: its requires may be what failed; the pass reads the workflow again and writes the end
    // without it (the owner queued).
    if (written.status === 'stale')
      return { kind: 'stale', stageCommands, ...(end ? { endWrite: true as const } : {}) };
    if (written.status === 'committed') {
      if (end) await afterEndWrite(env, end, planned.plan.workflow.id);
      next.workflow.revision = written.revision;
      const { transitions } = planned;
      const reread = planned.reread ? { reread: true as const } : {};
      return {
        kind: 'written',
        decision,
        next,
        requeueWritten: written.requeued,
        transitions,
        stageCommands,
        ...reread,
        ...(written.doneWritten ? { doneWritten: true as const } : {}),
      };
    }
    // The command could not be written by one statement (policies, its key taken, refused): nothing was written;
    // what came before it is written in a transaction, and the command sent there.
    stageCommands = false;
    inTransaction = { kind: 'needs-transaction', ...planned.before, transitions: planned.transitions - 1 };
  }
  const { plan, state, transitions } = inTransaction as Extract<Planned, { kind: 'needs-transaction' }>;
  const decided = await transitionInTransaction(env, revision, plan, state, now);
  if (!decided) return { kind: 'stale', stageCommands };
  return { kind: 'written', ...decided, requeueWritten: false, transitions, stageCommands };
}
