import {
  abortWorkflow,
  pauseWorkflow,
  resumeWorkflow,
  retryWorkflow,
  WORKFLOW_EVENT_TYPES,
} from 'better-compute/provision';
import { expect, it } from 'vitest';
import type { EngineLab } from '../support/engine-lab';

export function eventScenarios(getLab: () => EngineLab) {
  it('publishes each transition with subject workflow/<id> and the workflow, node and profile in its data', async () => {
    const lab = getLab();
    const id = await lab.start({
      id: 'lab-events',
      steps: [{ use: 'lab.noop' }, { use: 'lab.noop', when: 'missing' }],
    });
    await lab.settle();
    expect(await lab.eventTypes(id)).toEqual([
      'workflow.created',
      'workflow.started',
      'workflow.step.started',
      'workflow.step.succeeded',
      'workflow.step.skipped',
      'workflow.succeeded',
    ]);
    const { rows } = await lab.db.query<{ tenant_id: string; data: Record<string, unknown> }>(
      "SELECT tenant_id, data FROM events WHERE type = 'workflow.step.started'",
    );
    expect(rows[0]).toEqual({
      tenant_id: 'root',
      data: {
        workflowId: id,
        nodeId: lab.nodeId,
        profileId: 'lab-events',
        profileVersion: 1,
        stepId: 'main.1',
        action: 'lab.noop',
        phase: 'main',
        attempt: 0,
      },
    });
  });

  it('publishes all 13 event types across failure, retry, pause and abort', async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'fail', reason: 'bad' });
    const failing = await lab.start({ id: 'lab-ev-fail', steps: [{ use: 'lab.ping', retries: 1 }] });
    await lab.settle();
    lab.nodeAgent.respond({ outcome: 'ignore' });
    await retryWorkflow(lab.compute.context, { workflowId: failing });
    await lab.compute.runDueWork();
    await pauseWorkflow(lab.compute.context, { workflowId: failing });
    await resumeWorkflow(lab.compute.context, { workflowId: failing });
    await abortWorkflow(lab.compute.context, { workflowId: failing });
    await lab.settle();
    const ok = await lab.start({ id: 'lab-ev-ok', steps: [{ use: 'lab.noop', when: 'nope' }, { use: 'lab.noop' }] });
    await lab.settle();
    const seen = new Set([...(await lab.eventTypes(failing)), ...(await lab.eventTypes(ok))]);
    expect([...seen].sort()).toEqual([...WORKFLOW_EVENT_TYPES].sort());
  });

  it('writes the failed event with the workflow error in its data', async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'fail', reason: 'bad' });
    const id = await lab.start({ id: 'lab-ev-error', steps: [{ use: 'lab.ping' }] });
    await lab.settle();
    const { rows } = await lab.db.query<{ data: { error: { code: string; message: string } } }>(
      "SELECT data FROM events WHERE type = 'workflow.failed' AND subject = $1",
      [`workflow/${id}`],
    );
    expect(rows[0]?.data.error).toMatchObject({
      code: 'COMMAND_FAILED',
      message: 'main.1 (lab.ping): command lab.ping failed: bad',
    });
  });
}
