import { ENGINE_DEFAULTS } from 'better-compute/provision';
import { beforeEach, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases';
import { type EngineLab, lab as record } from './support/engine-lab';
import { useEngineLab } from './support/use-engine-lab';

// The built-in waits of steps-and-profiles.md ("Waiting"): wait.agentJoined and wait.observedGeneration, written with
// stepNotReady, so the workflow is queued again 5 s later until they hold or their deadline passes.

async function dueAt(lab: EngineLab): Promise<number | undefined> {
  const { rows } = await lab.db.query<{ not_before: Date }>(
    "SELECT not_before FROM work_items WHERE kind = 'workflow'",
  );
  return rows[0]?.not_before.getTime();
}

describe.each(BACKENDS)('the built-in waits on $name', ({ create }) => {
  const getLab = useEngineLab(create);
  let lab: EngineLab;
  beforeEach(async () => {
    lab = getLab();
    // The agents connected at reset; the workflow starts a second later.
    lab.clock.advance(1_000);
  });

  describe('wait.agentJoined', () => {
    it('waits 5 s at a time until the node joins in the role, after the workflow started', async () => {
      const id = await lab.start({
        id: 'wait-provisioned',
        steps: [{ use: 'wait.agentJoined', with: { role: 'provisioned' } }],
      });
      await lab.compute.runDueWork();
      expect(await dueAt(lab)).toBe(lab.clock.now().getTime() + ENGINE_DEFAULTS.stepNotReadyMs);
      expect((await lab.workflow(id)).steps[0]?.state).toBe('running');

      lab.clock.advance(ENGINE_DEFAULTS.stepNotReadyMs);
      const session = await lab.nodeAgent.rejoin({ role: 'provisioned' });
      await lab.settle();
      const wf = await lab.workflow(id);
      expect(wf.state).toBe('succeeded');
      expect(wf.steps[0]?.result).toEqual({
        bootId: session.bootId,
        role: 'provisioned',
        connectedAt: session.connectedAt.toISOString(),
      });
    });

    it("waits for role 'node' by default, and the session the node had before the workflow does not count", async () => {
      const id = await lab.start({ id: 'wait-node', steps: [{ use: 'wait.agentJoined', timeout: '1m' }] });
      await lab.compute.runDueWork();
      expect((await lab.workflow(id)).steps[0]?.state).toBe('running');
      lab.clock.advance(2_000);
      const session = await lab.nodeAgent.rejoin();
      await lab.settle();
      expect((await lab.workflow(id)).steps[0]).toMatchObject({
        state: 'succeeded',
        result: { bootId: session.bootId, role: 'node' },
      });
    });

    it('does not take a session in another role', async () => {
      const id = await lab.start({ id: 'wait-other-role', steps: [{ use: 'wait.agentJoined', timeout: '30s' }] });
      await lab.compute.runDueWork();
      lab.clock.advance(1_000);
      await lab.nodeAgent.rejoin({ role: 'ramdisk' });
      await lab.settle();
      expect((await lab.workflow(id)).steps[0]).toMatchObject({ state: 'failed', error: { code: 'TIMEOUT' } });
    });

    it('fails TIMEOUT at its deadline when the node never joins, having looked every 5 s', async () => {
      const id = await lab.start({ id: 'wait-timeout', steps: [{ use: 'wait.agentJoined', timeout: '12s' }] });
      const started = lab.clock.now().getTime();
      await lab.settle();
      const wf = await lab.workflow(id);
      expect(wf.state).toBe('failed');
      expect(wf.steps[0]).toMatchObject({ state: 'failed', error: { code: 'TIMEOUT' } });
      expect(lab.clock.now().getTime() - started).toBe(12_000);
    });

    it('refuses a role that is not an agent role when the profile is stored', async () => {
      await expect(
        lab.start({ id: 'wait-bad-role', steps: [{ use: 'wait.agentJoined', with: { role: 'king' } }] }),
      ).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    });
  });

  describe('wait.observedGeneration', () => {
    it('waits 5 s at a time until observed_generation reaches generation', async () => {
      await lab.db.query('UPDATE nodes SET generation = 3, observed_generation = 2 WHERE id = $1', [lab.nodeId]);
      const id = await lab.start({ id: 'wait-generation', steps: [{ use: 'wait.observedGeneration' }] });
      await lab.compute.runDueWork();
      expect(await dueAt(lab)).toBe(lab.clock.now().getTime() + ENGINE_DEFAULTS.stepNotReadyMs);
      lab.clock.advance(ENGINE_DEFAULTS.stepNotReadyMs);
      await lab.db.query('UPDATE nodes SET observed_generation = 3 WHERE id = $1', [lab.nodeId]);
      await lab.settle();
      expect((await lab.workflow(id)).steps[0]).toMatchObject({
        state: 'succeeded',
        result: { generation: 3, observedGeneration: 3 },
      });
    });

    it('succeeds at once when the node already converged', async () => {
      await lab.db.query('UPDATE nodes SET observed_generation = generation WHERE id = $1', [lab.nodeId]);
      const id = await lab.start({ id: 'wait-converged', steps: [{ use: 'wait.observedGeneration' }] });
      await lab.settle();
      expect((await lab.workflow(id)).steps[0]).toMatchObject({
        state: 'succeeded',
        result: { generation: 1, observedGeneration: 1 },
      });
    });

    it('fails TIMEOUT at its deadline when the node never converges', async () => {
      const id = await lab.start({
        id: 'wait-generation-timeout',
        steps: [{ use: 'wait.observedGeneration', timeout: '12s' }, { use: 'lab.noop' }],
      });
      await lab.settle();
      const wf = await lab.workflow(id);
      expect(wf.steps.map((s) => s.state)).toEqual(['failed', 'cancelled']);
      expect(wf.steps[0]?.error?.code).toBe('TIMEOUT');
      expect(record.runs).toHaveLength(0);
    });
  });
});
