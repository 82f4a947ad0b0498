import type { ModuleContext } from 'better-compute/core';
import { FencedExecutor, isFencedError } from 'better-compute/core/kernel';
import { abortWorkflow, pauseWorkflow, WORKFLOW_WORK_KIND } from 'better-compute/provision';
import { expect, it } from 'vitest';
import { type EngineLab, lab as record, stepStates } from '../support/engine-lab';
import { rejectionOf } from '../support/errors';

/** The workflow's events (but `workflow.created`) grouped by the transaction that wrote them, in commit order. */
async function eventsByTransaction(lab: EngineLab, id: string): Promise<string[][]> {
  const { rows } = await lab.db.query<{ type: string; step: string | null; tx: string }>(
    `SELECT type, data->>'stepId' AS step, tx_id::text AS tx FROM events
     WHERE subject = $1 AND type <> 'workflow.created' ORDER BY tx_id, seq`,
    [`workflow/${id}`],
  );
  const groups = new Map<string, string[]>();
  for (const row of rows) {
    const group = groups.get(row.tx) ?? [];
    group.push(row.step ? `${row.type} ${row.step}` : row.type);
    groups.set(row.tx, group);
  }
  return [...groups.values()];
}

export function transitionScenarios(getLab: () => EngineLab) {
  it("commits a step's end with what follows it: the next start, or the workflow's end", async () => {
    const lab = getLab();
    const id = await lab.start({
      id: 'lab-commits',
      steps: [{ use: 'lab.noop' }, { use: 'lab.noop', when: 'absent' }, { use: 'lab.noop' }],
    });
    await lab.settle();
    expect(await eventsByTransaction(lab, id)).toEqual([
      ['workflow.started', 'workflow.step.started main.1'],
      ['workflow.step.succeeded main.1', 'workflow.step.skipped main.2', 'workflow.step.started main.3'],
      ['workflow.step.succeeded main.3', 'workflow.succeeded'],
    ]);
  });

  it('evaluates when on the labels a step set just before it', async () => {
    const lab = getLab();
    const id = await lab.start({
      id: 'lab-labels',
      steps: [
        { use: 'lab.label', with: { key: 'gpu.model', value: 'H100' } },
        { use: 'lab.noop', when: 'gpu.model=H100' },
        { use: 'lab.noop', when: '!gpu.model' },
      ],
    });
    await lab.settle();
    expect(stepStates(await lab.workflow(id))).toEqual(['main.1:succeeded', 'main.2:succeeded', 'main.3:skipped']);
  });

  it('settles a step whose workflow was paused while it ran, and starts nothing after it', async () => {
    const lab = getLab();
    record.duringRun = async (workflowId) => {
      await pauseWorkflow(lab.compute.context, { workflowId });
    };
    const id = await lab.start({ id: 'lab-pause-mid', steps: [{ use: 'lab.duringRun' }, { use: 'lab.noop' }] });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('paused');
    expect(stepStates(wf)).toEqual(['main.1:succeeded', 'main.2:pending']);
    expect(record.runs.map((r) => r.action)).toEqual(['lab.duringRun']);
  });

  it('does not settle a step cancelled by an abort while it ran, and runs the cleanup', async () => {
    const lab = getLab();
    record.duringRun = async (workflowId) => {
      await abortWorkflow(lab.compute.context, { workflowId, reason: 'operator' });
    };
    const id = await lab.start({
      id: 'lab-abort-mid',
      steps: [{ use: 'lab.duringRun' }, { use: 'lab.noop' }],
      cleanup: [{ use: 'lab.inspect' }],
    });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('cancelled');
    expect(stepStates(wf)).toEqual(['main.1:cancelled', 'main.2:cancelled', 'cleanup.1:succeeded']);
    expect(record.runs.map((r) => r.action)).toEqual(['lab.duringRun', 'lab.inspect']);
  });

  it('writes nothing and refuses as fenced when the worker no longer holds the shard', async () => {
    const lab = getLab();
    const id = await lab.start({ id: 'lab-fenced', steps: [{ use: 'lab.noop' }] });
    const reconcile = lab.provision.reconcilers?.[WORKFLOW_WORK_KIND];
    const lease = { workerId: 'wkr_gone', shard: 0, epoch: 1 };
    const lost = new FencedExecutor(lab.db, lease);
    const ctx: ModuleContext = { ...lab.compute.context, sql: lost, lease };
    const error = await rejectionOf(() => reconcile?.(lab.nodeId, ctx) ?? Promise.resolve());
    expect(isFencedError(error)).toBe(true);
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('pending');
    expect(stepStates(wf)).toEqual(['main.1:pending']);
    expect(record.runs).toEqual([]);
  });
}
