import { expect, it } from 'vitest';
import { type EngineLab, lab as record } from '../support/engine-lab';

/** A control-plane step whose run meets a database fault (issue: liveness under database faults). */
export function databaseFaultScenarios(getLab: () => EngineLab, backend: string) {
  it('runs a step again, without spending an attempt, when a retryable database error ends its run', async () => {
    const lab = getLab();
    record.dbFaultsLeft = 3;
    const id = await lab.start({ id: 'lab-db-fault', steps: [{ use: 'lab.dbFault' }] });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('succeeded');
    expect(wf.steps[0]).toMatchObject({ state: 'succeeded', attempt: 0, result: { one: 1 } });
    expect(record.runs.map((r) => r.attempt)).toEqual([0, 0, 0, 0]);
    expect(await lab.eventTypes(id)).not.toContain('workflow.step.failed');
  });

  it("fails such a step with TIMEOUT at each attempt's deadline, spending no attempt on the faults themselves", async () => {
    const lab = getLab();
    record.dbFaultsLeft = Number.POSITIVE_INFINITY;
    const id = await lab.start({ id: 'lab-db-gone', steps: [{ use: 'lab.dbFault', retries: 2 }] });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.steps[0]).toMatchObject({ state: 'failed', attempt: 2, error: { code: 'TIMEOUT' } });
    // Every attempt ran until its deadline; the backoff grows, so a minute's budget is a handful of runs, not hundreds.
    const perAttempt = [0, 1, 2].map((a) => record.runs.filter((r) => r.attempt === a).length);
    for (const runs of perAttempt) expect(runs).toBeGreaterThan(3);
    for (const runs of perAttempt) expect(runs).toBeLessThan(40);
  });

  it('fails a step at once on a database error that is not retryable (a unique violation)', async () => {
    const lab = getLab();
    record.dbFaultsLeft = 1;
    record.dbFault = 'unique';
    const id = await lab.start({ id: 'lab-db-unique', steps: [{ use: 'lab.dbFault' }] });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.steps[0]).toMatchObject({ state: 'failed', attempt: 0, error: { code: 'INTERNAL' } });
    expect(record.runs).toHaveLength(1);
  });

  // Only PostgreSQL has a server backend to terminate.
  if (backend === 'postgres') {
    it('survives PostgreSQL ending the connection of a query inside a step', async () => {
      const lab = getLab();
      record.dbFaultsLeft = 2;
      record.dbFault = 'kill';
      const id = await lab.start({ id: 'lab-db-kill', steps: [{ use: 'lab.dbFault' }, { use: 'lab.noop' }] });
      await lab.settle();
      const wf = await lab.workflow(id);
      expect(wf.state).toBe('succeeded');
      expect(wf.steps[0]).toMatchObject({ state: 'succeeded', attempt: 0 });
    });
  }

  it('stops waiting for a run that ignores its signal at its deadline, and refuses what it sends afterwards', async () => {
    const lab = getLab();
    const id = await lab.start({ id: 'lab-stubborn', steps: [{ use: 'lab.stubborn' }] });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.steps[0]).toMatchObject({ state: 'failed', error: { code: 'TIMEOUT' } });
    record.releaseStubborn?.();
    await expect.poll(() => record.stubbornSend).toBe('refused');
    const { rowCount } = await lab.db.query('SELECT 1 FROM commands');
    expect(rowCount).toBe(0);
  });
}
