import { ENGINE_DEFAULTS } from 'better-compute/provision';
import { expect, it } from 'vitest';
import { type EngineLab, lab as record } from '../support/engine-lab';
import { firstOfTwoAnswered, workflowReconciler } from './direct-pass';

interface ItemRow {
  not_before: Date;
  claimed_by: string | null;
}

async function workflowItem(lab: EngineLab): Promise<ItemRow | undefined> {
  const { rows } = await lab.db.query<ItemRow>(
    "SELECT not_before, claimed_by FROM work_items WHERE kind = 'workflow' AND key = $1",
    [lab.nodeId],
  );
  return rows[0];
}

/** A pass on the result of the first of two agent steps, the reconciler called directly with `item` or without. */
async function passOnFirstResult(lab: EngineLab, item: boolean) {
  const id = await firstOfTwoAnswered(lab, 'lab-own-requeue');
  // What the worker's claim does to the item before the pass (the wake's due time is then in the past).
  await lab.db.query(
    "UPDATE work_items SET claimed_by = 'test', enqueued_not_before = NULL, urgent = false WHERE kind = 'workflow' AND key = $1",
    [lab.nodeId],
  );
  const ctx = { ...lab.compute.context, ...(item ? { item: { kind: 'workflow', key: lab.nodeId } } : {}) };
  const result = await workflowReconciler(lab)(lab.nodeId, ctx);
  return { id, result };
}

export function ownRequeueScenarios(getLab: () => EngineLab) {
  it('a pass that ends waiting on an agent step writes its own requeue with the transition', async () => {
    const lab = getLab();
    const { id, result } = await passOnFirstResult(lab, true);
    const pollAt = lab.clock.now().getTime() + ENGINE_DEFAULTS.workflowPollMs;
    expect(result).toEqual({ requeueAfterMs: ENGINE_DEFAULTS.workflowPollMs, requeueWritten: true });
    // Nobody recorded the pass (the reconciler was called directly): the statement that sent main.2's command did.
    expect(await workflowItem(lab)).toEqual({ not_before: new Date(pollAt), claimed_by: null });
    expect((await lab.workflow(id)).steps.map((s) => s.state)).toEqual(['succeeded', 'waiting']);
  });

  it('leaves the requeue to the worker when the pass is not run for its work item', async () => {
    const lab = getLab();
    const { result } = await passOnFirstResult(lab, false);
    expect(result).toEqual({ requeueAfterMs: ENGINE_DEFAULTS.workflowPollMs });
    // Still claimed and due from the result's wake: only a worker's record would requeue it.
    const row = await workflowItem(lab);
    expect(row?.claimed_by).toBe('test');
    expect(row?.not_before.getTime()).toBeLessThanOrEqual(lab.clock.now().getTime());
  });

  it("writes a relaying step's last send and its pass's requeue in one statement", async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'ignore' });
    const id = await lab.start({ id: 'lab-relay-own-requeue', steps: [{ use: 'lab.relay', on: 'site' }] });
    const ctx = { ...lab.compute.context, item: { kind: 'workflow', key: lab.nodeId } };
    const result = await workflowReconciler(lab)(lab.nodeId, ctx);
    expect(result).toEqual({ requeueAfterMs: ENGINE_DEFAULTS.commandStepPollMs, requeueWritten: true });
    const pollAt = lab.clock.now().getTime() + ENGINE_DEFAULTS.commandStepPollMs;
    // Nobody recorded the pass (the reconciler was called directly): the statement that sent the command did.
    expect(await workflowItem(lab)).toEqual({ not_before: new Date(pollAt), claimed_by: null });
    const { rows } = await lab.db.query<{ state: string; workflow_id: string }>(
      'SELECT state, workflow_id FROM commands',
    );
    expect(rows).toEqual([{ state: 'pending', workflow_id: id }]);
  });

  it("writes a held send before the run's next statement and before its next send", async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'succeed' });
    const id = await lab.start({ id: 'lab-send-then-read', steps: [{ use: 'lab.sendThenRead', on: 'site' }] });
    await lab.settle();
    expect((await lab.workflow(id)).steps[0]).toMatchObject({ state: 'succeeded', result: { seen: 2 } });
    // The first run's read saw both sends: neither was still held when it ran.
    expect(record.contexts[0]).toEqual({ seen: ['a', 'b'] });
  });

  it("fails the step with the queue's refusal of its held send, as awaitCommand would have thrown it", async () => {
    const lab = getLab();
    const id = await lab.start({
      id: 'lab-relay-refused',
      steps: [{ use: 'lab.relay', on: 'site', with: { kind: 'lab.unregistered' } }],
    });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('failed');
    expect(wf.steps[0]?.state).toBe('failed');
    expect(wf.steps[0]?.error?.code).toMatch(/^[A-Z_]+$/);
    expect(wf.steps[0]?.error?.message).toContain('lab.unregistered');
    // One run: the refusal ended the step, it was not held and refused again and again.
    expect(record.runs.filter((r) => r.action === 'lab.relay')).toHaveLength(1);
    const { rows } = await lab.db.query('SELECT id FROM commands');
    expect(rows).toHaveLength(0);
  });

  it("writes what goes with a relaying step's send by the statement that sends it, and never again", async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'ignore' });
    const id = await lab.start({
      id: 'lab-relay-with',
      steps: [{ use: 'lab.relay', on: 'site', with: { withWrite: true } }],
    });
    const ctx = { ...lab.compute.context, item: { kind: 'workflow', key: lab.nodeId } };
    expect(await workflowReconciler(lab)(lab.nodeId, ctx)).toMatchObject({ requeueWritten: true });
    expect(await sentWith(lab)).toBe('1');
    // Later passes find the command open (sent) and write nothing with it again.
    for (let i = 0; i < 3; i += 1) await workflowReconciler(lab)(lab.nodeId, ctx);
    expect(await sentWith(lab)).toBe('1');
    lab.siteAgent.respond({ outcome: 'succeed' });
    await lab.siteAgent.poll();
    await lab.settle();
    expect((await lab.workflow(id)).state).toBe('succeeded');
    expect(await sentWith(lab)).toBe('1');
    const { rows } = await lab.db.query('SELECT id FROM commands WHERE workflow_id = $1', [id]);
    expect(rows).toHaveLength(1);
  });

  it("sends nothing when what goes with the send cannot be written, and fails the step with the write's refusal", async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'succeed' });
    await lab.db.query(`UPDATE nodes SET labels = labels || '{"refuse-with":"yes"}'::jsonb WHERE id = $1`, [
      lab.nodeId,
    ]);
    const id = await lab.start({
      id: 'lab-relay-with-refused',
      steps: [{ use: 'lab.relay', on: 'site', with: { withWrite: true } }],
    });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('failed');
    expect(wf.steps[0]?.error).toMatchObject({ code: 'NOT_FOUND', message: 'the node refuses' });
    expect(await sentWith(lab)).toBeNull();
    const { rows } = await lab.db.query('SELECT id FROM commands WHERE workflow_id = $1', [id]);
    expect(rows).toHaveLength(0);
  });
}

/** The count `lab.relay`'s staged write keeps in the lab node's `sent-with` label (null: never written). */
async function sentWith(lab: EngineLab): Promise<string | null> {
  const { rows } = await lab.db.query<{ n: string | null }>(
    "SELECT labels->>'sent-with' AS n FROM nodes WHERE id = $1",
    [lab.nodeId],
  );
  return rows[0]?.n ?? null;
}
