import { ENGINE_DEFAULTS } from 'better-compute/provision';
import { beforeEach, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases';
import { type EngineLab, stepStates } from './support/engine-lab';
import { useEngineLab } from './support/use-engine-lab';

// core/README.md "Agent sessions": opening an agent session queues the node's workflow (provision declares its
// `workflow` kind in wakeOnAgentSession), so a step waiting for the agent runs at once; its poll is the fallback.
// Every test here opens the session without moving the clock and runs only what is due.

async function workflowDueAt(lab: EngineLab): Promise<number | undefined> {
  const { rows } = await lab.db.query<{ not_before: Date }>(
    "SELECT not_before FROM work_items WHERE kind = 'workflow'",
  );
  return rows[0]?.not_before.getTime();
}

describe.each(BACKENDS)('an agent opening its session wakes its node workflow on $name', ({ create }) => {
  const getLab = useEngineLab(create);
  let lab: EngineLab;
  beforeEach(() => {
    lab = getLab();
    // The agents connected at reset; the workflow starts a second later.
    lab.clock.advance(1_000);
  });

  it("runs an await: 'rejoin' step when the agent comes back, not at the next 10 s poll", async () => {
    const id = await lab.start({ id: 'wake-rejoin', steps: [{ use: 'lab.reboot' }] });
    await lab.compute.runDueWork();
    expect(stepStates(await lab.workflow(id))).toEqual(['main.1:waiting']);
    expect(await workflowDueAt(lab)).toBe(lab.clock.now().getTime() + ENGINE_DEFAULTS.workflowPollMs);

    lab.clock.advance(1);
    await lab.nodeAgent.rejoin({ bootId: 'boot-2' });
    expect(await workflowDueAt(lab)).toBe(lab.clock.now().getTime());
    await lab.compute.runDueWork();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('succeeded');
    expect(wf.steps[0]?.result).toEqual({ bootId: 'boot-2', role: 'node' });
  });

  it('runs wait.agentJoined when the node joins, not at the next 5 s poll', async () => {
    const id = await lab.start({
      id: 'wake-joined',
      steps: [{ use: 'wait.agentJoined', with: { role: 'provisioned' } }],
    });
    await lab.compute.runDueWork();
    expect(await workflowDueAt(lab)).toBe(lab.clock.now().getTime() + ENGINE_DEFAULTS.stepNotReadyMs);

    lab.clock.advance(1);
    const session = await lab.nodeAgent.rejoin({ role: 'provisioned' });
    await lab.compute.runDueWork();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('succeeded');
    expect(wf.steps[0]?.result).toMatchObject({ bootId: session.bootId, role: 'provisioned' });
  });

  it('leaves a workflow whose agent did not come back to its poll', async () => {
    const id = await lab.start({
      id: 'wake-other',
      steps: [{ use: 'wait.agentJoined', with: { role: 'provisioned' } }],
    });
    await lab.compute.runDueWork();
    lab.clock.advance(1);
    // Another node's agent: the site agent.
    await lab.siteAgent.rejoin();
    expect(await workflowDueAt(lab)).toBe(lab.clock.now().getTime() - 1 + ENGINE_DEFAULTS.stepNotReadyMs);
    await lab.compute.runDueWork();
    expect(stepStates(await lab.workflow(id))).toEqual(['main.1:running']);
  });
});
