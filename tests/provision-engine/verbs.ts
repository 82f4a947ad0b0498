import { abortWorkflow, pauseWorkflow, resumeWorkflow, retryWorkflow } from 'better-compute/provision';
import { expect, it } from 'vitest';
import { type EngineLab, lab as record, stepStates } from '../support/engine-lab';
import { rejectionOf } from '../support/errors';

export function verbScenarios(getLab: () => EngineLab) {
  const ctx = () => getLab().compute.context;

  it('aborts a running workflow: cancels the in-flight command, runs cleanup, ends cancelled with the reason', async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'silent' });
    const id = await lab.start(
      {
        id: 'lab-abort',
        steps: [{ use: 'lab.ping' }, { use: 'lab.noop' }],
        cleanup: [{ use: 'lab.noop', with: { tag: 'c' } }],
      },
      { owner: 'lab.owner' },
    );
    await lab.compute.runDueWork();
    await lab.nodeAgent.poll();
    const aborted = await abortWorkflow(ctx(), { workflowId: id, reason: 'wrong image' });
    expect(aborted.state).toBe('cancelling');
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf).toMatchObject({ state: 'cancelled', cancelReason: 'wrong image' });
    expect(stepStates(wf)).toEqual(['main.1:cancelled', 'main.2:cancelled', 'cleanup.1:succeeded']);
    const command = await lab.compute.commands.get(lab.db, wf.steps[0]?.commandId as string);
    expect(command?.state).toBe('cancelled');
    expect(record.owner).toEqual([lab.nodeId]);
  });

  it('aborts a workflow whose control-plane step waits on a relayed command: that command is cancelled too', async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'ignore' });
    const id = await lab.start({ id: 'lab-abort-relay', steps: [{ use: 'lab.relay', on: 'site' }] });
    await lab.compute.runDueWork();
    const sent = await lab.db.query<{ id: string; state: string }>(
      'SELECT id, state FROM commands WHERE workflow_id = $1',
      [id],
    );
    expect(sent.rows).toMatchObject([{ state: 'pending' }]);
    await abortWorkflow(ctx(), { workflowId: id, reason: 'operator' });
    await lab.settle();
    expect((await lab.workflow(id)).state).toBe('cancelled');
    const command = await lab.compute.commands.get(lab.db, sent.rows[0]?.id as string);
    expect(command).toMatchObject({ state: 'cancelled', reason: 'workflow aborted: operator' });
  });

  it('sends nothing for a control-plane step whose workflow was aborted while it ran', async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'ignore' });
    record.duringRun = async (workflowId) => {
      await abortWorkflow(ctx(), { workflowId, reason: 'operator' });
    };
    const id = await lab.start({
      id: 'lab-abort-mid-run',
      steps: [{ use: 'lab.relay', on: 'site', with: { hookFirst: true } }],
    });
    await lab.settle();
    expect(record.runs.filter((r) => r.action === 'lab.relay')).toHaveLength(1);
    expect((await lab.workflow(id)).state).toBe('cancelled');
    const { rows } = await lab.db.query('SELECT id FROM commands WHERE workflow_id = $1', [id]);
    expect(rows).toEqual([]);
  });

  it('cancels a pending workflow at once, with no cleanup owed', async () => {
    const lab = getLab();
    const id = await lab.start({
      id: 'lab-abort-pending',
      steps: [{ use: 'lab.noop' }],
      cleanup: [{ use: 'lab.noop' }],
    });
    const wf = await abortWorkflow(ctx(), { workflowId: id });
    expect(wf.state).toBe('cancelled');
    expect(stepStates(wf)).toEqual(['main.1:cancelled', 'cleanup.1:cancelled']);
    await lab.settle();
    expect(record.runs).toHaveLength(0);
  });

  it('does nothing when aborted twice, and refuses to abort a succeeded workflow with INVALID_STATE', async () => {
    const lab = getLab();
    const id = await lab.start({ id: 'lab-abort-twice', steps: [{ use: 'lab.noop' }] });
    await abortWorkflow(ctx(), { workflowId: id, reason: 'first' });
    const again = await abortWorkflow(ctx(), { workflowId: id, reason: 'second' });
    expect(again).toMatchObject({ state: 'cancelled', cancelReason: 'first' });
    expect((await lab.eventTypes(id)).filter((t) => t === 'workflow.cancelled')).toHaveLength(1);
    const done = await lab.start({ id: 'lab-abort-done', steps: [{ use: 'lab.noop' }] });
    await lab.settle();
    expect(await rejectionOf(() => abortWorkflow(ctx(), { workflowId: done }))).toMatchObject({
      code: 'INVALID_STATE',
    });
  });

  it('answers NOT_FOUND for a workflow of another tenant', async () => {
    const lab = getLab();
    const id = await lab.start({ id: 'lab-tenant', steps: [{ use: 'lab.noop' }] });
    const error = await rejectionOf(() => abortWorkflow(ctx(), { workflowId: id, tenantId: 'acme' }));
    expect(error).toMatchObject({ code: 'NOT_FOUND', details: { path: ['workflowId'] } });
  });

  it('retries a failed workflow from its first unsucceeded main step with the next attempt, re-arming on-failure and cleanup', async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'fail', reason: 'bad' });
    const id = await lab.start({
      id: 'lab-retry-wf',
      steps: [
        { use: 'lab.noop' },
        { use: 'lab.ping', onFailure: { use: 'lab.noop', with: { tag: 'h' } } },
        { use: 'lab.noop' },
      ],
      cleanup: [{ use: 'lab.noop', with: { tag: 'c' } }],
    });
    await lab.settle();
    expect((await lab.workflow(id)).state).toBe('failed');
    lab.nodeAgent.respond({ outcome: 'succeed' });
    const retried = await retryWorkflow(ctx(), { workflowId: id });
    expect(stepStates(retried)).toEqual([
      'main.1:succeeded',
      'main.2:pending',
      'main.3:pending',
      'main.2.on-failure:pending',
      'cleanup.1:pending',
    ]);
    expect(retried.steps[1]?.attempt).toBe(1);
    expect(retried).toMatchObject({ state: 'running', error: null });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('succeeded');
    expect(stepStates(wf)).toEqual([
      'main.1:succeeded',
      'main.2:succeeded',
      'main.3:succeeded',
      'main.2.on-failure:cancelled',
      'cleanup.1:succeeded',
    ]);
    expect(lab.nodeAgent.answered.map((a) => a.key)).toEqual([`wf:${id}:main.2`, `wf:${id}:main.2#1`]);
  });

  it('retries from fromStep, gives steps their retries again, and refuses a fromStep that is not a main step', async () => {
    const lab = getLab();
    record.flakyFailuresLeft = 3;
    const id = await lab.start({ id: 'lab-from', steps: [{ use: 'lab.noop' }, { use: 'lab.flaky' }] });
    await lab.settle();
    expect((await lab.workflow(id)).steps[1]).toMatchObject({ state: 'failed', attempt: 2 });
    expect(await rejectionOf(() => retryWorkflow(ctx(), { workflowId: id, fromStep: 'cleanup.1' }))).toMatchObject({
      code: 'INVALID_INPUT',
      details: { path: ['fromStep'] },
    });
    record.flakyFailuresLeft = 1;
    await retryWorkflow(ctx(), { workflowId: id, fromStep: 'main.1' });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('succeeded');
    expect(wf.steps.map((s) => s.attempt)).toEqual([1, 4]);
  });

  it('refuses to retry a workflow that is not failed, and one whose node has another active workflow', async () => {
    const lab = getLab();
    const running = await lab.start({ id: 'lab-nr', steps: [{ use: 'lab.noop' }] });
    expect(await rejectionOf(() => retryWorkflow(ctx(), { workflowId: running }))).toMatchObject({
      code: 'INVALID_STATE',
    });
    await lab.settle();
    lab.nodeAgent.respond({ outcome: 'fail', reason: 'bad' });
    const failed = await lab.start({ id: 'lab-failed', steps: [{ use: 'lab.ping' }] });
    await lab.settle();
    await lab.start({ id: 'lab-other', steps: [{ use: 'lab.noop' }] });
    expect(await rejectionOf(() => retryWorkflow(ctx(), { workflowId: failed }))).toMatchObject({ code: 'CONFLICT' });
  });

  it('pauses a running workflow: the step in flight finishes and nothing further starts until resume', async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'ignore' });
    const id = await lab.start({ id: 'lab-pause', steps: [{ use: 'lab.ping' }, { use: 'lab.noop' }] });
    await lab.compute.runDueWork();
    const paused = await pauseWorkflow(ctx(), { workflowId: id });
    expect(paused.state).toBe('paused');
    lab.nodeAgent.respond({ outcome: 'succeed' });
    await lab.settle();
    expect(stepStates(await lab.workflow(id))).toEqual(['main.1:succeeded', 'main.2:pending']);
    expect((await resumeWorkflow(ctx(), { workflowId: id })).state).toBe('running');
    await lab.settle();
    expect((await lab.workflow(id)).state).toBe('succeeded');
  });

  it('refuses to pause a workflow in its cleanup phase or not running, and to resume one not paused', async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'ignore' });
    const id = await lab.start({
      id: 'lab-pause-cleanup',
      steps: [{ use: 'lab.noop' }],
      cleanup: [{ use: 'lab.ping' }],
    });
    await lab.compute.runDueWork();
    expect(stepStates(await lab.workflow(id))).toEqual(['main.1:succeeded', 'cleanup.1:waiting']);
    expect(await rejectionOf(() => pauseWorkflow(ctx(), { workflowId: id }))).toMatchObject({
      code: 'INVALID_STATE',
      details: { reason: 'cleanup' },
    });
    expect(await rejectionOf(() => resumeWorkflow(ctx(), { workflowId: id }))).toMatchObject({ code: 'INVALID_STATE' });
    await abortWorkflow(ctx(), { workflowId: id });
    expect(await rejectionOf(() => pauseWorkflow(ctx(), { workflowId: id }))).toMatchObject({ code: 'INVALID_STATE' });
  });
}
