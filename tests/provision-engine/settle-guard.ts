import type { ModuleContext } from 'better-compute/core';
import { stepNotReady, WORKFLOW_WORK_KIND } from 'better-compute/provision';
import { expect, it } from 'vitest';
import { type EngineLab, lab as record } from '../support/engine-lab';

/** Another pass of the workflow reconciler, run to its end while the outer pass's step is still running. */
async function anotherPass(lab: EngineLab): Promise<void> {
  const reconcile = lab.provision.reconcilers?.[WORKFLOW_WORK_KIND];
  if (!reconcile) throw new Error('the provision module has no workflow reconciler');
  await reconcile(lab.nodeId, lab.compute.context as ModuleContext);
}

// A control-plane step runs outside any transaction, so by the time its run ends another pass may have timed it out
// (and retried and started it again). Its outcome's write is then stale (the revision moved), so the pass reads the
// workflow again and settles the outcome against it: only the check that the step is still `running` with the
// attempt that ran keeps a late outcome off a step that moved on.
export function settleGuardScenarios(getLab: () => EngineLab) {
  it("does not settle a late run's outcome on the next attempt another pass started meanwhile", async () => {
    const lab = getLab();
    let inAnotherPass = false;
    record.duringRun = async (_workflowId, attempt) => {
      if (attempt === 0) {
        // Attempt 0 outlives its deadline; another pass fails it TIMEOUT, retries it and starts attempt 1, whose
        // first run is not ready yet. Then attempt 0's run ends, with a result.
        lab.clock.advance(61_000);
        inAnotherPass = true;
        await anotherPass(lab);
        inAnotherPass = false;
        return { ranAs: attempt };
      }
      if (inAnotherPass) throw stepNotReady(1_000);
      return { ranAs: attempt };
    };
    const id = await lab.start({ id: 'lab-late-attempt', steps: [{ use: 'lab.duringRun', retries: 1 }] });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('succeeded');
    expect(wf.steps[0]).toMatchObject({ state: 'succeeded', attempt: 1, result: { ranAs: 1 } });
    expect(record.runs.map((r) => r.attempt)).toEqual([0, 1, 1]);
    expect(await lab.eventTypes(id)).toEqual([
      'workflow.created',
      'workflow.started',
      'workflow.step.started',
      'workflow.step.failed',
      'workflow.step.retrying',
      'workflow.step.started',
      'workflow.step.succeeded',
      'workflow.succeeded',
    ]);
  });

  it("does not settle a late run's outcome on a step another pass timed out meanwhile", async () => {
    const lab = getLab();
    record.duringRun = async (_workflowId, attempt) => {
      // The run outlives its deadline; another pass fails the step TIMEOUT (no retries), marks the workflow failing
      // and starts its cleanup, whose wait is not ready yet. Then the run ends, with a result.
      lab.clock.advance(61_000);
      await anotherPass(lab);
      record.ready = true;
      return { ranAs: attempt };
    };
    const id = await lab.start({
      id: 'lab-late-timeout',
      steps: [{ use: 'lab.duringRun' }],
      cleanup: [{ use: 'lab.wait' }],
    });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('failed');
    expect(wf.error).toMatchObject({ code: 'TIMEOUT', stepId: 'main.1' });
    expect(wf.steps.map((s) => [s.stepId, s.state, s.error?.code ?? null])).toEqual([
      ['main.1', 'failed', 'TIMEOUT'],
      ['cleanup.1', 'succeeded', null],
    ]);
    expect((await lab.eventTypes(id)).filter((t) => t === 'workflow.step.succeeded')).toHaveLength(1);
  });
}
