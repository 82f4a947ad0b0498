import type { Json } from '@better-compute/core';
import type { CommandStaging, CommitChange, EventStaging } from '@better-compute/core/kernel';
import type { StagedEndWrite } from '../define/workflow-end-write';
import type { ClaimAnswers } from './claim-answers';
import { commitPlan, needsTransaction } from './commit-plan';
import type { RunRequest } from './decision';
import { afterEndWrite } from './end-write';
import { isEmptyPlan } from './plan';
import { type Planned, planPass } from './plan-pass';
import type { StartWriter } from './run-gate';
import { startSeedOf } from './start-seed';
import type { EngineEnv } from './transitions';
import type { LoadedWorkflow } from './workflow-rows';

// Transitions a first pass may take before its step runs: the start, then steps skipped by their `when`.
const FIRST_PASS_BUDGET = 32;

/** The next workflow's first step, to run with its start written by the statement that ends the workflow before it. */
export interface ChainedStart {
  readonly request: RunRequest;
  /** Writes the ended workflow's plan, the end write carrying the next workflow as started, and the run's sends. */
  readonly writer: StartWriter;
  /** The next workflow after its first transitions. */
  readonly next: LoadedWorkflow;
  /** What its claim would have read for its runs (the modules' preloads, by id). */
  readonly reads: Readonly<Record<string, Json>>;
  readonly transitions: number;
}

// Whether `action` is a control-plane step that declares what it sends (its start waits for its first send).
function relays(env: EngineEnv, action: string): boolean {
  const definition = env.steps.get(action);
  return definition?.runsOn === 'control-plane' && (definition.sends?.length ?? 0) > 0;
}

// Whether a planned first pass can be written with the end before it: a relaying step's deferred start (its sends go
// with it) and nothing a single statement of inserts cannot carry (no command of its own, cancels, host config,
// label guard, run writes, owner).
function chainable(env: EngineEnv, planned: Planned): planned is Extract<Planned, { kind: 'decided' }> {
  if (planned.kind !== 'decided' || planned.decision.kind !== 'run' || planned.reread) return false;
  if (!relays(env, planned.decision.request.action)) return false;
  const { plan } = planned;
  if (isEmptyPlan(plan) || plan.owner || plan.command || plan.readsLabels || plan.with || needsTransaction(plan)) {
    return false;
  }
  return planned.next.steps.every((step) => step.commandId === null && step.rejoin === null);
}

/**
 * The next workflow an end write starts on the pass's own key (`StagedEndWrite.next`), planned from its seed in the
 * same pass and written with the end: its start, its first step's `running` mark and that step's sends go into the
 * statement that ends the workflow before it, saving the next workflow's claim and first statement. Undefined when
 * that cannot be: the pass's plan is not the ending one-statement kind, the start was not staged by the engine, a
 * workflow preload the claim read cannot say what it would read for the next workflow, or its first pass is not a
 * relaying step's start (see `chainable`); the end is then written as staged.
 *
 * The writer's statement is the ended workflow's, guarded on its revision: stale (or not writable by one statement),
 * nothing is written and the step's run is superseded; the pass then reads the workflow again and ends it without
 * the end write. Committed, it returns the next workflow's revision, from which the pass goes on.
 *
 * @example
 * ```ts
 * const chained = await chainNextStart(env, planned, snapshot, end, reads, now, claim);
 * ```
 */
export async function chainNextStart(
  env: EngineEnv,
  planned: Planned,
  snapshot: LoadedWorkflow,
  end: StagedEndWrite,
  reads: Readonly<Record<string, Json>>,
  now: Date,
  claim: ClaimAnswers | undefined,
): Promise<ChainedStart | undefined> {
  const { ctx } = env;
  const item = ctx.item;
  const next = end.next;
  const seed = next && startSeedOf(next);
  if (!seed || !item || next.wake.kind !== item.kind || next.wake.key !== item.key) return undefined;
  // The pass's item goes on with the next workflow, so the write may queue nothing else; and it must carry the start
  // whole (its events too), as staged.
  if (end.wake && (end.wake.kind !== next.wake.kind || end.wake.key !== next.wake.key)) return undefined;
  if (next.events.some((event) => !end.events?.includes(event))) return undefined;
  if (planned.kind !== 'decided' || planned.decision.kind !== 'idle' || isEmptyPlan(planned.plan)) return undefined;
  if (needsTransaction(planned.plan) || !(ctx.commands as Partial<CommandStaging>).stage) return undefined;
  if (!(ctx.events as Partial<EventStaging>).stage) return undefined;
  const pending = seed.pending(snapshot.workflow.node);
  // A first step that can only be skipped or relay: planning any other would read for nothing (an agent step's site).
  const firstStep = pending.steps.find((step) => step.phase === 'main');
  if (firstStep && !relays(env, firstStep.action) && firstStep.spec.when === undefined) return undefined;
  // What a claim of the next workflow would read for its runs, from what this pass's claim read.
  const following = {
    workflowId: pending.workflow.id,
    nodeId: pending.workflow.nodeId,
    document: pending.workflow.document,
    startedAt: now,
  };
  const nextReads: Record<string, Json> = {};
  for (const preload of env.workflowPreloads ?? []) {
    if (!(preload.id in reads)) continue;
    const value = preload.following?.(reads[preload.id] as Json, following);
    if (value === undefined) return undefined;
    nextReads[preload.id] = value;
  }
  const answers = claim ? { ...claim, reads: nextReads } : undefined;
  const first = await planPass(env, pending, undefined, FIRST_PASS_BUDGET, now, true, answers);
  if (!chainable(env, first) || first.decision.kind !== 'run') return undefined;
  if (first.next.workflow.startedAt?.getTime() !== now.getTime()) return undefined;
  const { request } = first.decision;
  // Inserted at the revision its first statement would have left it at.
  const after = { ...first.next, workflow: { ...first.next.workflow, revision: first.next.workflow.revision + 1 } };
  // The staged insert's changes give way to the insert of the workflow as its first pass leaves it.
  const staged = next.changes as readonly CommitChange[];
  const started = seed.startedAs(after);
  if (started.length !== staged.length || staged.some((change) => !end.changes.includes(change))) return undefined;
  const changes = end.changes.map((change) => {
    const at = staged.indexOf(change);
    return at === -1 ? change : (started[at] ?? change);
  });
  // The next workflow's own wake is the pass's item, which goes on with it.
  const { wake: _ownItem, ...rest } = end;
  const chainedEnd: StagedEndWrite = { ...rest, changes, events: [...(end.events ?? []), ...first.plan.events] };
  const ending = planned.plan;
  const revision = snapshot.workflow.revision;
  const writer: StartWriter = async (extra) => {
    const written = await commitPlan(env, ending, now, {
      guard: { revision },
      end: chainedEnd,
      ...(extra.sends ? { sends: extra.sends } : {}),
      ...(extra.requeue ? { requeue: extra.requeue } : {}),
    });
    if (written.status !== 'committed') return { status: 'stale' };
    await afterEndWrite(env, end, ending.workflow.id);
    return { status: 'committed', revision: after.workflow.revision, requeued: written.requeued };
  };
  return {
    request,
    writer,
    next: after,
    reads: nextReads,
    transitions: planned.transitions + first.transitions,
  };
}
