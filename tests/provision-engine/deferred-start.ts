import type { ModuleContext } from 'better-compute/core';
import { FencedExecutor, isFencedError } from 'better-compute/core/kernel';
import { type ProfileStep, pauseWorkflow, resumeWorkflow } from 'better-compute/provision';
import { expect, it } from 'vitest';
import { type EngineLab, lab as record, stepStates } from '../support/engine-lab';
import { rejectionOf } from '../support/errors';
import { workflowReconciler } from './direct-pass';

// A relaying step (one that declares `sends`) is started by the statement that writes its send, when its run reaches
// the database no earlier (steps-and-profiles.md, "Idempotency and wake-ups"; provision README, "A relaying step's
// start").

/** The transaction ids (xmin) of the step's start event, its commands and the workflow's work item. */
async function writers(lab: EngineLab, id: string) {
  const { rows } = await lab.db.query<{ started: string; commands: string[]; item: string | null }>(
    `SELECT (SELECT xmin::text FROM events WHERE subject = $1 AND type = 'workflow.step.started') AS started,
       ARRAY(SELECT xmin::text FROM commands WHERE workflow_id = $2 ORDER BY key) AS commands,
       (SELECT xmin::text FROM work_items WHERE kind = 'workflow' AND key = $3) AS item`,
    [`workflow/${id}`, id, lab.nodeId],
  );
  return rows[0];
}

function passCtx(lab: EngineLab): ModuleContext {
  return { ...lab.compute.context, item: { kind: 'workflow', key: lab.nodeId } };
}

export function deferredStartScenarios(getLab: () => EngineLab) {
  it("writes a relaying step's start, its send and its pass's requeue by one statement when its run reads nothing", async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'ignore' });
    const steps: ProfileStep[] = [{ use: 'lab.relay', on: 'site', with: { siteAgentId: lab.siteAgent.nodeId } }];
    const id = await lab.start({ id: 'lab-relay-deferred', steps });
    // The worker's pass: its claim reads what the run would look up (the step's commands).
    await lab.compute.runDueWork();
    const seen = await writers(lab, id);
    expect(seen?.commands).toHaveLength(1);
    expect(seen?.commands[0]).toBe(seen?.started);
    expect(seen?.item).toBe(seen?.started);
    expect(stepStates(await lab.workflow(id))).toEqual(['main.1:running']);
    lab.siteAgent.respond({ outcome: 'succeed' });
    await lab.siteAgent.poll();
    await lab.settle();
    expect((await lab.workflow(id)).state).toBe('succeeded');
  });

  it('marks a relaying step running before its run reaches the database, and sends after that', async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'ignore' });
    const steps: ProfileStep[] = [
      { use: 'lab.relay', on: 'site', with: { readOwnState: true, siteAgentId: lab.siteAgent.nodeId } },
    ];
    const id = await lab.start({ id: 'lab-relay-reads', steps });
    await lab.compute.runDueWork();
    expect(record.contexts).toEqual([{ ownState: 'running' }]);
    const seen = await writers(lab, id);
    expect(seen?.commands).toHaveLength(1);
    expect(seen?.commands[0]).not.toBe(seen?.started);
  });

  it('starts and sends nothing when the workflow was paused while a relaying step decided, and sends once after resume', async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'succeed' });
    let pauses = 1;
    record.duringRun = async (workflowId) => {
      if (pauses-- > 0) await pauseWorkflow(lab.compute.context, { workflowId });
    };
    const steps: ProfileStep[] = [
      { use: 'lab.noop' },
      { use: 'lab.relay', on: 'site', with: { hookFirst: true, siteAgentId: lab.siteAgent.nodeId } },
    ];
    const id = await lab.start({ id: 'lab-relay-paused', steps });
    await lab.settle();
    const paused = await lab.workflow(id);
    expect(paused.state).toBe('paused');
    // main.1's end was to be written with main.2's start: it is settled against the paused workflow, main.2 not started.
    expect(stepStates(paused)).toEqual(['main.1:succeeded', 'main.2:pending']);
    expect(record.runs.map((r) => r.action)).toEqual(['lab.noop', 'lab.relay']);
    expect((await lab.db.query('SELECT id FROM commands WHERE workflow_id = $1', [id])).rows).toEqual([]);
    await resumeWorkflow(lab.compute.context, { workflowId: id });
    await lab.settle();
    expect((await lab.workflow(id)).state).toBe('succeeded');
    const { rows } = await lab.db.query<{ key: string }>('SELECT key FROM commands WHERE workflow_id = $1', [id]);
    expect(rows).toEqual([{ key: `wf:${id}:main.2#0` }]);
    // main.1 ran once; main.2 decided (superseded), decided again after resume (sent), and ran on its result.
    expect(record.runs.map((r) => r.action)).toEqual(['lab.noop', 'lab.relay', 'lab.relay', 'lab.relay']);
  });

  it('starts and sends nothing for a relaying step when the worker no longer holds the shard', async () => {
    const lab = getLab();
    const steps: ProfileStep[] = [{ use: 'lab.relay', on: 'site', with: { siteAgentId: lab.siteAgent.nodeId } }];
    const id = await lab.start({ id: 'lab-relay-fenced', steps });
    const lease = { workerId: 'wkr_gone', shard: 0, epoch: 1 };
    const ctx: ModuleContext = { ...passCtx(lab), sql: new FencedExecutor(lab.db, lease), lease };
    const error = await rejectionOf(() => workflowReconciler(lab)(lab.nodeId, ctx) ?? Promise.resolve());
    expect(isFencedError(error)).toBe(true);
    expect(stepStates(await lab.workflow(id))).toEqual(['main.1:pending']);
    expect((await lab.db.query('SELECT id FROM commands')).rows).toEqual([]);
  });

  it("starts a relaying step and fails it with the queue's refusal of the send written with its start", async () => {
    const lab = getLab();
    const steps: ProfileStep[] = [
      { use: 'lab.relay', on: 'site', with: { kind: 'lab.unregistered', siteAgentId: lab.siteAgent.nodeId } },
    ];
    const id = await lab.start({ id: 'lab-relay-deferred-refused', steps });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(stepStates(wf)).toEqual(['main.1:failed']);
    expect(wf.steps[0]?.error?.message).toContain('lab.unregistered');
    expect(await lab.eventTypes(id)).toContain('workflow.step.started');
    expect(record.runs.filter((r) => r.action === 'lab.relay')).toHaveLength(1);
    expect((await lab.db.query('SELECT id FROM commands')).rows).toEqual([]);
  });

  it('starts a relaying step alone and waits on the command already under its key, sending nothing twice', async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'ignore' });
    const steps: ProfileStep[] = [{ use: 'lab.relay', on: 'site', with: { siteAgentId: lab.siteAgent.nodeId } }];
    const id = await lab.start({ id: 'lab-relay-key-taken', steps });
    // A command under the step's key already (as an earlier owner's send would have left it).
    const existing = await lab.compute.context.commands.enqueue(lab.db, {
      nodeId: lab.siteAgent.nodeId,
      kind: 'lab.wipe',
      payload: {},
      key: `wf:${id}:main.1#0`,
      workflowId: id,
      stepId: 'main.1',
      wake: { kind: 'workflow', key: lab.nodeId },
      notAfter: new Date(lab.clock.now().getTime() + 600_000),
    });
    await lab.compute.runDueWork();
    expect(stepStates(await lab.workflow(id))).toEqual(['main.1:running']);
    const { rows } = await lab.db.query<{ id: string }>('SELECT id FROM commands WHERE workflow_id = $1', [id]);
    expect(rows).toEqual([{ id: existing.id }]);
    lab.siteAgent.respond({ outcome: 'succeed' });
    await lab.siteAgent.poll();
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('succeeded');
    expect(wf.steps[0]?.result).toEqual({ commandId: existing.id });
  });
}
