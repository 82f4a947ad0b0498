import type { Json, SqlExecutor } from '@better-compute/core';
import {
  type CommitChange,
  type CommitResult,
  commit,
  connectedSiteAgents,
  currentAgentSession,
  currentAgentSessionAtSql,
  DEFAULT_SESSION_STALE_AFTER_MS,
  OPEN_COMMAND_STATES,
} from '@better-compute/core/kernel';
import { nodeHasLabelsSql, setNodeHostSection } from '@better-compute/core/nodes';
import { resolveHostConfig } from '../config-units/apply';
import type { StagedEndWrite } from '../define/workflow-end-write';
import { siteAgentFor } from '../steps/site-agent-for';
import type { Known, Need, Plan, SessionCheck } from './plan';
import type { StepSend } from './run-gate';
import type { EngineEnv } from './transitions';
import { STEP_CHANGE_FIELDS, type WorkflowRecord } from './workflow-rows';

/**
 * Reads what a transition needs: a connected site agent of the node's site (the boot-lease holder first), what the
 * driver targets add, an agent's session (these three also without a transaction, before the plan's guarded
 * statement), a command (`commands.get`, which expires one past its `notAfter`) or the host config resolved on the
 * node's labels (the node row locked), these two in the caller's transaction with the workflow row locked.
 *
 * @example
 * ```ts
 * known = { ...known, ...(await readNeed(tx, env, transition.needs, now)) };
 * ```
 */
export async function readNeed(tx: SqlExecutor, env: EngineEnv, need: Need, now: Date): Promise<Known> {
  switch (need.kind) {
    case 'site-agent': {
      if (need.siteId === undefined) return { siteAgent: (await siteAgentFor(tx, need.nodeId, env.ctx.clock)) ?? null };
      if (need.siteId === null) return { siteAgent: null };
      const [agent] = await connectedSiteAgents(tx, need.siteId, { now: env.ctx.clock.now() });
      return { siteAgent: agent ?? null };
    }
    case 'command':
      return { command: (await env.ctx.commands.get(tx, need.commandId)) ?? null };
    case 'agent-session': {
      const session = await currentAgentSession(tx, need.nodeId, { now });
      return { session: session ? { bootId: session.bootId ?? null, role: session.role ?? null } : null };
    }
    case 'driver-target': {
      const driverFields: Record<string, Json> = {};
      for (const target of env.driverTargets ?? []) {
        Object.assign(driverFields, (await target.resolve(tx, { nodeId: need.nodeId })) ?? {});
      }
      return { driverFields };
    }
    case 'host-config':
      return { hostConfig: await resolveHostConfig(tx, env.configUnits, need.nodeId, need.hostConfig) };
  }
}

// The step columns a transition may change, from the step's JSON (`->>` is SQL NULL for a JSON null).
const STEP_SETS = `state = v->>'state', attempt = (v->>'attempt')::int, attempt_base = (v->>'attemptBase')::int,
  command_id = v->>'commandId', deadline = (v->>'deadline')::timestamptz, started_at = (v->>'startedAt')::timestamptz,
  first_started_at = (v->>'firstStartedAt')::timestamptz, finished_at = (v->>'finishedAt')::timestamptz,
  result = NULLIF(v->'result', 'null'::jsonb), error = NULLIF(v->'error', 'null'::jsonb),
  rejoin = NULLIF(v->'rejoin', 'null'::jsonb)`;

/**
 * Whether `check.session` is still the node's current agent session (none connected when null), as
 * `currentAgentSession` picks it at `now`: compared by boot id and role.
 */
function sessionIsSql(bind: (value: unknown) => string, check: SessionCheck, now: Date): string {
  const expected = check.session ? JSON.stringify([check.session.bootId, check.session.role]) : null;
  const staleBefore = new Date(now.getTime() - DEFAULT_SESSION_STALE_AFTER_MS);
  const current = currentAgentSessionAtSql(
    bind(check.nodeId),
    `${bind(staleBefore)}::timestamptz`,
    'jsonb_build_array(s.boot_id, s.role)',
  );
  return `(${current}) IS NOT DISTINCT FROM ${bind(expected)}::jsonb`;
}

/** What a plan's statement checks besides the lease: the revision it was planned from, and its node's labels. */
export interface PlanGuard {
  revision: number;
}

function workflowChange(plan: Plan, now: Date, guard: PlanGuard | undefined): CommitChange {
  const w: WorkflowRecord = plan.workflow;
  return {
    name: 'wf',
    sql: ({ bind, guard: held }) => {
      const sets = plan.workflowChanged
        ? `, state = ${bind(w.state)}, error = ${bind(w.error === null ? null : JSON.stringify(w.error))}::jsonb,
       started_at = ${bind(w.startedAt)}::timestamptz, finished_at = ${bind(w.finishedAt)}::timestamptz,
       cancel_reason = ${bind(w.cancelReason)}, updated_at = ${bind(now)}`
        : '';
      const conditions = [held];
      if (guard) {
        conditions.push(`revision = ${bind(guard.revision)}`);
        // The plan evaluated `when` on these labels: a step run may have changed them (inspection sets labels). A
        // plan that evaluated none does not depend on them, so a run's label write does not make it stale.
        if (w.node && plan.readsLabels) {
          conditions.push(nodeHasLabelsSql(bind(w.node.id), `${bind(JSON.stringify(w.node.labels))}::jsonb`));
        }
        // The plan decided on a session as the claim read it before a step's run: it must still be the current one.
        if (plan.sessionCheck) conditions.push(sessionIsSql(bind, plan.sessionCheck, now));
      }
      return `UPDATE workflows SET revision = revision + 1${sets}
       WHERE id = ${bind(w.id)} AND ${conditions.join(' AND ')} RETURNING revision`;
    },
  };
}

function stepsChange(plan: Plan, now: Date): CommitChange {
  return {
    name: 'st',
    sql: ({ bind, guard, commandId }) => {
      const steps = [...plan.steps.values()].map((step) => {
        const fields = STEP_CHANGE_FIELDS.map((field) => [field, step[field]]);
        if (plan.command?.stepId === step.stepId) fields.push(['commandId', commandId ?? null]);
        return Object.fromEntries([['stepId', step.stepId], ...fields]);
      });
      return `UPDATE workflow_steps s SET ${STEP_SETS}, updated_at = ${bind(now)}
       FROM jsonb_array_elements(${bind(JSON.stringify(steps))}::jsonb) v
       WHERE s.workflow_id = ${bind(plan.workflow.id)} AND s.step_id = v->>'stepId' AND ${guard}`;
    },
  };
}

const OPEN_STATES_SQL = OPEN_COMMAND_STATES.map((state) => `'${state}'`).join(', ');

/**
 * Cancels every open command step `stepId` of `workflowId` sent, in `tx` after the plan's statement: a relaying step's
 * commands are its own (the step row records only an agent step's). The plan's statement already moved the step on,
 * and a step's send holds the step row (see `sendCommand`), so a send that raced this transaction either committed
 * before that statement (and is found here) or finds the step no longer running and writes nothing.
 */
async function cancelCommandsOfStep(
  env: EngineEnv,
  tx: SqlExecutor,
  workflowId: string,
  stepId: string,
  reason: string,
): Promise<void> {
  // The open states spelled out, so the partial index on open commands serves the read.
  const { rows } = await tx.query<{ id: string }>(
    `SELECT id FROM commands WHERE state IN (${OPEN_STATES_SQL}) AND workflow_id = $1 AND step_id = $2
     ORDER BY created_at`,
    [workflowId, stepId],
  );
  for (const { id } of rows) await env.ctx.commands.cancel(tx, id, reason);
}

/** How writing a plan went; `revision` is the workflow's after it. */
export type PlanCommit =
  | { status: 'committed'; revision: number; requeued: boolean; doneWritten: boolean }
  | Exclude<CommitResult<unknown>, { status: 'committed' }>;

/**
 * Writes a plan: the workflow row (its revision bumped), every changed step, the events in order, the command and the
 * owner's work item, by core's `commit`. Without `tx` it is one autocommitted statement, fenced by the worker's lease,
 * that writes only while the workflow's revision is `guard.revision` and, when the plan decided on them (a `when`),
 * its node's labels are those it read (`stale` otherwise), and may requeue the pass's own work item
 * (`needs-transaction` when the owner's work queue cannot be written by the statement). In a transaction (the
 * workflow row locked) it also cancels the commands the plan cancels and sets the host config. A plan that needs a
 * transaction (see {@link needsTransaction}) must get one. `sends`: a control-plane step's commands (and what goes with
 * them) written with the plan that starts it (see `RunGate`'s deferred start). `end`: the owner's end write for a plan
 * that ends the workflow (see `stageEndWrite`), written by the one statement instead of queuing the owner (ignored in
 * `tx`, where the owner is queued).
 *
 * @example
 * ```ts
 * const written = await commitPlan(env, plan, now, { guard: { revision: snapshot.workflow.revision } });
 * ```
 */
export async function commitPlan(
  env: EngineEnv,
  plan: Plan,
  now: Date,
  options: {
    tx?: SqlExecutor;
    guard?: PlanGuard;
    requeue?: Date;
    done?: boolean;
    sends?: readonly StepSend[];
    end?: StagedEndWrite;
  },
): Promise<PlanCommit> {
  const { ctx } = env;
  const { tx } = options;
  // An owner's end write goes only into the one statement (its changes' requires hold that statement's gate).
  const end = tx ? undefined : options.end;
  const changes: [CommitChange, ...CommitChange[]] = [workflowChange(plan, now, options.guard)];
  if (plan.steps.size > 0) changes.push(stepsChange(plan, now));
  // A run's writes with its result go with its settle: their requires hold the plan's gate.
  for (const write of plan.with ?? []) changes.push(...write.changes);
  // A step's sends written with its start (the plan's revision guard is their gate: the step is the plan's) carry
  // what goes with them.
  const sends = options.sends ?? [];
  for (const send of sends) changes.push(...(send.with_?.changes ?? []));
  if (end) changes.push(...end.changes);
  const events = end?.events ? [...plan.events, ...end.events] : plan.events;
  // The owner's work item goes in with the plan that ends the workflow (enqueued in `tx` when the queue cannot),
  // unless its end write is in the statement: then what that write queues, if anything.
  const wake = end ? end.wake : plan.owner;
  const result = await commit<{ revision: number }>(
    ctx,
    {
      changes,
      ...(events.length > 0 ? { events } : {}),
      ...(plan.command ? { command: plan.command.input } : {}),
      ...(sends.length > 0 ? { commands: sends.map((send) => send.command) } : {}),
      ...(options.requeue && !tx ? { requeue: options.requeue } : {}),
      ...(options.done && !tx ? { done: true } : {}),
      ...(wake ? { wake } : {}),
    },
    tx,
  );
  if (result.status !== 'committed') return result;
  const sent = plan.command && plan.steps.get(plan.command.stepId);
  if (sent) sent.commandId = result.commandId ?? null;
  if (tx) {
    for (const cancel of plan.cancels) {
      if ('stepId' in cancel) {
        await cancelCommandsOfStep(env, tx, plan.workflow.id, cancel.stepId, cancel.reason);
        continue;
      }
      const command = await ctx.commands.get(tx, cancel.commandId);
      if (command && OPEN_COMMAND_STATES.includes(command.state)) {
        await ctx.commands.cancel(tx, command.id, cancel.reason);
      }
    }
    if (plan.hostConfig) await setNodeHostSection(tx, plan.hostConfig.nodeId, plan.hostConfig.host, now);
  }
  return {
    status: 'committed',
    revision: Number(result.row.revision),
    requeued: result.requeued,
    doneWritten: result.doneWritten === true,
  };
}

/**
 * Whether a plan can only be written in a transaction: it cancels a command or sets the host config. (Queuing the
 * owner does not: the plan's statement queues it.)
 *
 * @example
 * ```ts
 * if (needsTransaction(plan)) return inTransaction();
 * ```
 */
export function needsTransaction(plan: Plan): boolean {
  return plan.cancels.length > 0 || plan.hostConfig !== undefined;
}
