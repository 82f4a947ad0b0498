import { expect, it } from 'vitest';
import { type EngineLab, lab as record, stepStates } from '../support/engine-lab';

export function failureScenarios(getLab: () => EngineLab) {
  it('retries a failed command under a new idempotency key, and fails the workflow after cleanup once retries run out', async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'fail', reason: 'disk busy' });
    const id = await lab.start({
      id: 'lab-retry',
      steps: [{ use: 'lab.ping', retries: 2 }, { use: 'lab.noop' }],
      cleanup: [{ use: 'lab.noop', with: { tag: 'cleanup' } }],
    });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(lab.nodeAgent.answered.map((a) => a.key)).toEqual([
      `wf:${id}:main.1`,
      `wf:${id}:main.1#1`,
      `wf:${id}:main.1#2`,
    ]);
    expect(wf.steps[0]).toMatchObject({ state: 'failed', attempt: 2, error: { code: 'COMMAND_FAILED' } });
    expect(stepStates(wf)).toEqual(['main.1:failed', 'main.2:cancelled', 'cleanup.1:succeeded']);
    expect(wf.state).toBe('failed');
  });

  it('passes the attempt to control-plane retries and succeeds once an attempt does', async () => {
    const lab = getLab();
    record.flakyFailuresLeft = 2;
    const id = await lab.start({ id: 'lab-flaky', steps: [{ use: 'lab.flaky' }] });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(record.runs.map((r) => r.attempt)).toEqual([0, 1, 2]);
    expect(wf.steps[0]).toMatchObject({ state: 'succeeded', attempt: 2, result: { attempt: 2 } });
  });

  it("moves on past a step with onFailure: 'continue' and succeeds", async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'reject', reason: 'no' });
    const id = await lab.start({
      id: 'lab-continue',
      steps: [{ use: 'lab.ping', onFailure: 'continue' }, { use: 'lab.noop' }],
    });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(stepStates(wf)).toEqual(['main.1:failed', 'main.2:succeeded']);
    expect(wf).toMatchObject({ state: 'succeeded', error: null });
  });

  it("records rescue: true on the workflow error with onFailure: 'rescue'", async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'fail', reason: 'bad' });
    const id = await lab.start({ id: 'lab-rescue', steps: [{ use: 'lab.ping', onFailure: 'rescue' }] });
    await lab.settle();
    expect((await lab.workflow(id)).error).toMatchObject({ code: 'COMMAND_FAILED', rescue: true });
  });

  it('names the step, its action and its message in the workflow error, with the step code', async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'fail', reason: 'bad' });
    const id = await lab.start({ id: 'lab-error', steps: [{ use: 'lab.noop' }, { use: 'lab.ping' }] });
    await lab.settle();
    expect((await lab.workflow(id)).error).toEqual({
      code: 'COMMAND_FAILED',
      message: 'main.2 (lab.ping): command lab.ping failed: bad',
      stepId: 'main.2',
      action: 'lab.ping',
      reason: 'bad',
    });
  });

  it('runs an onFailure step first, then fails the workflow through its cleanup phase', async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'fail', reason: 'bad' });
    const id = await lab.start({
      id: 'lab-handler',
      steps: [{ use: 'lab.ping', onFailure: { use: 'lab.noop', with: { tag: 'handler' } } }, { use: 'lab.noop' }],
      cleanup: [{ use: 'lab.noop', with: { tag: 'cleanup' } }],
    });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(stepStates(wf)).toEqual([
      'main.1:failed',
      'main.2:cancelled',
      'main.1.on-failure:succeeded',
      'cleanup.1:succeeded',
    ]);
    expect(wf.state).toBe('failed');
    expect(record.runs.map((r) => r.stepId)).toEqual(['main.1.on-failure', 'cleanup.1']);
  });

  it("runs each started step's own cleanup last in first out, then the profile's, and skips that of steps never started", async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'fail', reason: 'bad' });
    const id = await lab.start({
      id: 'lab-lifo',
      steps: [{ use: 'lab.mount' }, { use: 'lab.mount' }, { use: 'lab.ping' }, { use: 'lab.mount' }],
      cleanup: [{ use: 'lab.noop', with: { tag: 'profile' } }],
    });
    await lab.settle();
    const wf = await lab.workflow(id);
    const cleanup = wf.steps.filter((s) => s.phase === 'cleanup').map((s) => `${s.stepId}:${s.state}`);
    expect(cleanup).toEqual([
      'main.4.cleanup.1:skipped',
      'main.4.cleanup.2:skipped',
      'main.2.cleanup.1:succeeded',
      'main.2.cleanup.2:succeeded',
      'main.1.cleanup.1:succeeded',
      'main.1.cleanup.2:succeeded',
      'cleanup.1:succeeded',
    ]);
    expect(record.runs.filter((r) => r.action === 'lab.noop').map((r) => r.stepId)).toEqual([
      'main.2.cleanup.1',
      'main.2.cleanup.2',
      'main.1.cleanup.1',
      'main.1.cleanup.2',
      'cleanup.1',
    ]);
  });

  it('runs the cleanup phase after a successful main phase too', async () => {
    const lab = getLab();
    const id = await lab.start({ id: 'lab-cleanup-ok', steps: [{ use: 'lab.mount' }], cleanup: [{ use: 'lab.noop' }] });
    await lab.settle();
    expect(stepStates(await lab.workflow(id))).toEqual([
      'main.1:succeeded',
      'main.1.cleanup.1:succeeded',
      'main.1.cleanup.2:succeeded',
      'cleanup.1:succeeded',
    ]);
  });

  it('never lets a failing cleanup step stop the rest of the cleanup', async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'fail', reason: 'bad' });
    const id = await lab.start({
      id: 'lab-cleanup-fails',
      steps: [{ use: 'lab.noop' }],
      cleanup: [{ use: 'lab.ping' }, { use: 'lab.throw' }, { use: 'lab.noop', with: { tag: 'last' } }],
    });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(stepStates(wf)).toEqual(['main.1:succeeded', 'cleanup.1:failed', 'cleanup.2:failed', 'cleanup.3:succeeded']);
    expect(wf.state).toBe('succeeded');
  });
}
