import type { SqlDatabase } from 'better-compute/core';
import { getWorkflow, type ProfileStep } from 'better-compute/provision';
import { type CrashPlan, crashingDatabase, createFakeClock, isWorkerCrashed, settle } from 'better-compute/testkit';
import { createEngineLab, type EngineLab } from './engine-lab';

// A workflow of every kind of step: control-plane (with its own cleanup), relaying, agent steps with a retry, an agent
// step that fails for good with an on-failure step, and the profile's cleanup.
export const SWEEP_PROFILE: { id: string; steps: ProfileStep[]; cleanup: ProfileStep[] } = {
  id: 'lab-sweep',
  steps: [
    { use: 'lab.mount' },
    { use: 'lab.relay', on: 'site', with: { key: 'wipe' } },
    { use: 'lab.ping', retries: 1, with: { n: 1 } },
    { use: 'lab.ping', with: { n: 9 }, onFailure: { use: 'lab.noop', with: { tag: 'handler' } } },
  ],
  cleanup: [{ use: 'lab.noop', with: { tag: 'final' } }],
};

/** Agents answer by the command alone, so every run sees the same answers: n=1 fails its first attempt, n=9 is refused. */
export function answerDeterministically(lab: EngineLab): void {
  lab.nodeAgent.respond((command) => {
    const n = (command.payload as { n?: number }).n;
    if (n === 9) return { outcome: 'reject', reason: 'unsupported' };
    if (n === 1 && !command.key.includes('#')) return { outcome: 'fail', reason: 'disk busy' };
    return { outcome: 'succeed', result: { n: n ?? null } };
  });
  lab.siteAgent.respond({ outcome: 'succeed', result: { wiped: true } });
}

/**
 * The workflow's events in the order they were written (the outbox's `seq`): its own subject, and any other event
 * that names it in its data. Ids and times are left out and the workflow's and node's ids replaced, so two runs compare
 * by type, order, count and content. An event written outside its transition shows here: a crash between the two
 * writes loses it or, on the re-run, writes it twice.
 */
export async function eventsOf(lab: EngineLab, workflowId: string) {
  const { rows } = await lab.db.query<{ subject: string; type: string; data: unknown }>(
    `SELECT subject, type, data FROM events WHERE subject = $1 OR data->>'workflowId' = $2 ORDER BY seq`,
    [`workflow/${workflowId}`, workflowId],
  );
  const anonymous = (value: unknown) =>
    JSON.parse(JSON.stringify(value).replaceAll(workflowId, 'WF').replaceAll(lab.nodeId, 'NODE')) as unknown;
  return rows.map((r) => ({ subject: anonymous(r.subject), type: r.type, data: anonymous(r.data) }));
}

/** The outcome of a run, without ids or times: what must not depend on where a worker died. */
export async function outcomeOf(lab: EngineLab, workflowId: string) {
  const wf = await getWorkflow(lab.db, { workflowId });
  const { rows } = await lab.db.query<{ key: string; kind: string; state: string; step_id: string }>(
    'SELECT key, kind, state, step_id FROM commands ORDER BY step_id, key',
  );
  const keys = rows.map((r) => ({
    key: r.key.replace(workflowId, 'WF'),
    kind: r.kind,
    state: r.state,
    stepId: r.step_id,
  }));
  return {
    state: wf.state,
    error: wf.error && { ...wf.error },
    steps: wf.steps.map((s) => ({
      stepId: s.stepId,
      state: s.state,
      attempt: s.attempt,
      error: s.error,
      result: s.action === 'lab.relay' ? (s.result === null ? null : 'commandId') : s.result,
    })),
    commands: keys,
    events: await eventsOf(lab, workflowId),
    answered: [...lab.nodeAgent.answered, ...lab.siteAgent.answered].map((a) => a.key.replace(workflowId, 'WF')).sort(),
  };
}

/**
 * One run: a host lab (the agents' side and the fresh worker) starts the workflow; a worker on a crashing handle of
 * the same database settles until it dies at `plan` (or finishes, when the plan is past the run's last boundary);
 * then the host settles what is left. Returns the outcome and how many boundaries the worker crossed.
 */
export async function runWithCrash(db: SqlDatabase, plan: CrashPlan | undefined) {
  const clock = createFakeClock();
  const host = await createEngineLab(db, { clock });
  await host.reset();
  answerDeterministically(host);
  const workflowId = await host.start(SWEEP_PROFILE);
  const counting = crashingDatabase(db, undefined);
  const probe = await createEngineLab(counting, { clock });
  const startup = counting.boundaries;
  await probe.close();
  const crashing = crashingDatabase(db, plan && { ...plan, at: plan.at + startup });
  const worker = await createEngineLab(crashing, { clock });
  let crashed = false;
  try {
    await settle(worker.compute, { clock, agents: host.agents });
  } catch (error) {
    if (!isWorkerCrashed(error)) throw error;
    crashed = true;
  }
  const boundaries = crashing.boundaries - startup;
  await worker.close();
  await host.settle();
  const outcome = await outcomeOf(host, workflowId);
  await host.close();
  return { outcome, crashed, boundaries };
}
