import { abortWorkflow } from 'better-compute/provision';
import { expect, it } from 'vitest';
import { type EngineLab, lab as record } from '../support/engine-lab';

/** How many times `lab.writeWith`'s write landed: the lab node's `result-with` label (null: never). */
async function resultWith(lab: EngineLab): Promise<string | null> {
  const { rows } = await lab.db.query<{ n: string | null }>(
    "SELECT labels->>'result-with' AS n FROM nodes WHERE id = $1",
    [lab.nodeId],
  );
  return rows[0]?.n ?? null;
}

const writeWithRuns = () => record.runs.filter((r) => r.action === 'lab.writeWith');

// `ctx.writeWithResult`: a control-plane step's run hands the engine a write to commit with its result, by the
// statement that records the step succeeded, and only then.
export function writeWithResultScenarios(getLab: () => EngineLab) {
  it('writes what a run asks for with its result once, when the step succeeds', async () => {
    const lab = getLab();
    const id = await lab.start({ id: 'lab-write-with', steps: [{ use: 'lab.writeWith' }, { use: 'lab.inspect' }] });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.steps.map((s) => s.state)).toEqual(['succeeded', 'succeeded']);
    expect(wf.steps[0]?.result).toEqual({ runs: 1 });
    expect(await resultWith(lab)).toBe('1');
  });

  it('writes nothing for a run that fails after asking', async () => {
    const lab = getLab();
    const id = await lab.start({ id: 'lab-write-with-fail', steps: [{ use: 'lab.writeWith', with: { fail: true } }] });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.steps[0]).toMatchObject({ state: 'failed', error: { code: 'DRIVER_ERROR' } });
    expect(await resultWith(lab)).toBeNull();
  });

  it("runs the step again when the write's requirements no longer hold, and writes once they do", async () => {
    const lab = getLab();
    await lab.db.query(`UPDATE nodes SET labels = labels || '{"refuse-with":"yes"}'::jsonb WHERE id = $1`, [
      lab.nodeId,
    ]);
    const id = await lab.start({
      id: 'lab-write-with-rerun',
      steps: [{ use: 'lab.writeWith', with: { clearRefusal: true } }],
    });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.steps[0]).toMatchObject({ state: 'succeeded', attempt: 0, result: { runs: 2 } });
    // The first run's write was refused with its settle (nothing of either), the second's went in with its own.
    expect(writeWithRuns().map((r) => r.attempt)).toEqual([0, 0]);
    expect(await resultWith(lab)).toBe('1');
  });

  it('writes nothing when the workflow was aborted while the step ran', async () => {
    const lab = getLab();
    record.duringRun = async (workflowId) => {
      await abortWorkflow(lab.compute.context, { workflowId, reason: 'operator' });
    };
    const id = await lab.start({ id: 'lab-write-with-abort', steps: [{ use: 'lab.writeWith' }] });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('cancelled');
    expect(writeWithRuns()).toHaveLength(1);
    expect(await resultWith(lab)).toBeNull();
  });
}

export function labelsWrittenByARunScenarios(getLab: () => EngineLab) {
  it("decides a site step's `when` after a run on the labels the run wrote, where the start needs a transaction", async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'succeed' });
    record.duringRun = async () => {
      await lab.db.query(`UPDATE nodes SET labels = labels || '{"gpu":"yes"}'::jsonb WHERE id = $1`, [lab.nodeId]);
      return null;
    };
    const id = await lab.start({
      id: 'lab-labels-then-site',
      steps: [{ use: 'lab.duringRun' }, { use: 'lab.sitePing', when: '!gpu' }, { use: 'lab.sitePing', when: 'gpu' }],
    });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.steps.map((s) => s.state)).toEqual(['succeeded', 'skipped', 'succeeded']);
  });
}
