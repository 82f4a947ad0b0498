import { ENGINE_DEFAULTS, stepCommandKey } from 'better-compute/provision';
import { isWorkerCrashed } from 'better-compute/testkit';
import { expect, it } from 'vitest';
import { createCrashingLab, type EngineLab, lab as record, stepStates } from '../support/engine-lab';
import { rejectionOf } from '../support/errors';

async function dueAt(lab: EngineLab): Promise<Date | undefined> {
  const { rows } = await lab.db.query<{ not_before: Date }>(
    "SELECT not_before FROM work_items WHERE kind = 'workflow'",
  );
  return rows[0]?.not_before;
}

export function controlPlaneScenarios(getLab: () => EngineLab) {
  it('runs control-plane steps in order and stores each result', async () => {
    const lab = getLab();
    const id = await lab.start({
      id: 'lab-cp',
      steps: [{ use: 'lab.noop', with: { tag: 'a' } }, { use: 'lab.inspect' }],
    });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('succeeded');
    expect(wf.steps.map((s) => s.result)).toEqual([{ ok: true, tag: 'a' }, { port: 50000 }]);
    expect(record.runs.map((r) => r.action)).toEqual(['lab.noop', 'lab.inspect']);
  });

  it("gives run the workflow's coordinates and no open transaction", async () => {
    const lab = getLab();
    const id = await lab.start(
      { id: 'lab-ctx', steps: [{ use: 'lab.noop' }, { use: 'lab.inspect' }] },
      { batchId: 'bat_1' },
    );
    await lab.settle();
    const { rows } = await lab.db.query<{ started_at: Date | string }>(
      'SELECT started_at FROM workflows WHERE id = $1',
      [id],
    );
    expect(record.contexts[0]).toEqual({
      workflowId: id,
      stepId: 'main.2',
      attempt: 0,
      idempotencyKey: `wf:${id}:main.2`,
      node: { id: lab.nodeId, siteId: lab.siteId },
      tenantId: 'root',
      batchId: 'bat_1',
      signalAborted: false,
      inside: 1,
      // The workflow as its row has it: the pinned profile, no owner, its start.
      workflow: {
        profile: 'lab-ctx@1',
        steps: 2,
        owner: null,
        startedAt: new Date(rows[0]?.started_at as string).toISOString(),
      },
    });
  });

  it('does not abort the signal of a step whose timeout is longer than a timer can hold', async () => {
    const lab = getLab();
    await lab.start({ id: 'lab-30d', steps: [{ use: 'lab.inspect', timeout: '30d' }] });
    await lab.settle();
    expect(record.contexts[0]).toMatchObject({ signalAborted: false });
  });

  it('runs a step again under the same idempotency key when the worker died before settling it', async () => {
    const lab = getLab();
    const id = await lab.start({ id: 'lab-crash', steps: [{ use: 'lab.noop' }] });
    // Boundaries of the dying worker's first pass: 1 claims the due items, 2 is the kernel's expiry sweep (due first,
    // by kind), 3 requeues it, 4 starts the workflow and marks main.1 running in one statement, then the step runs;
    // 5 would settle it, and the worker dies before that commits.
    const dying = await createCrashingLab(lab.db, lab.clock, 5, 'before-commit');
    const error = await rejectionOf(() => dying.compute.runDueWork());
    expect(isWorkerCrashed(error)).toBe(true);
    expect(stepStates(await lab.workflow(id))).toEqual(['main.1:running']);
    await lab.settle();
    expect((await lab.workflow(id)).state).toBe('succeeded');
    expect(record.runs.map((r) => r.idempotencyKey)).toEqual([`wf:${id}:main.1`, `wf:${id}:main.1`]);
  });

  it('leaves a step the worker was running when it stopped for the next owner, aborting its signal and failing nothing', async () => {
    const lab = getLab();
    record.hangs = true;
    const id = await lab.start({ id: 'lab-stop', steps: [{ use: 'lab.hang' }] });
    const [worker] = await lab.compute.startWorkers(1);
    for (let i = 0; i < 250 && record.runs.length === 0; i += 1)
      await new Promise((resolve) => setTimeout(resolve, 20));
    await worker?.stop();
    expect(record.sawAbort).toBe(true);
    expect(stepStates(await lab.workflow(id))).toEqual(['main.1:running']);
    record.hangs = false;
    await lab.settle();
    expect((await lab.workflow(id)).steps[0]).toMatchObject({ state: 'succeeded', result: { hung: false } });
    expect(record.runs.map((r) => r.idempotencyKey)).toEqual([`wf:${id}:main.1`, `wf:${id}:main.1`]);
  });

  it('runs a step that threw stepNotReady again after 5 seconds by default', async () => {
    const lab = getLab();
    await lab.start({ id: 'lab-wait', steps: [{ use: 'lab.wait' }] });
    await lab.compute.runDueWork();
    const runAt = lab.clock.now().getTime();
    expect((await dueAt(lab))?.getTime()).toBe(runAt + ENGINE_DEFAULTS.stepNotReadyMs);
    lab.clock.advance(ENGINE_DEFAULTS.stepNotReadyMs);
    record.ready = true;
    await lab.settle();
    expect(record.runs).toHaveLength(2);
  });

  it('runs a step again after the delay it gave stepNotReady', async () => {
    const lab = getLab();
    record.waitMs = 750;
    await lab.start({ id: 'lab-wait-ms', steps: [{ use: 'lab.wait' }] });
    await lab.compute.runDueWork();
    expect((await dueAt(lab))?.getTime()).toBe(lab.clock.now().getTime() + 750);
  });

  it('fails a step that is still not ready at its deadline with TIMEOUT', async () => {
    const lab = getLab();
    const id = await lab.start({ id: 'lab-wait-timeout', steps: [{ use: 'lab.wait', timeout: '12s' }] });
    const started = lab.clock.now().getTime();
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.steps[0]).toMatchObject({ state: 'failed', error: { code: 'TIMEOUT' } });
    expect(lab.clock.now().getTime() - started).toBe(12_000);
    expect(record.runs).toHaveLength(3); // at 0, 5 s and 10 s; the deadline at 12 s fails it
  });

  it('fails a step not registered in this worker with INVALID_CONFIG', async () => {
    const lab = getLab();
    const id = await lab.start({ id: 'lab-unregistered', steps: [{ use: 'lab.noop' }] });
    await lab.db.query("UPDATE workflow_steps SET action = 'lab.gone' WHERE workflow_id = $1", [id]);
    await lab.settle();
    expect((await lab.workflow(id)).steps[0]).toMatchObject({ state: 'failed', error: { code: 'INVALID_CONFIG' } });
  });

  it('fails a step whose input no longer passes its manifest with INVALID_INPUT', async () => {
    const lab = getLab();
    const id = await lab.start({ id: 'lab-bad-input', steps: [{ use: 'lab.inspect', with: { port: 22 } }] });
    await lab.db.query(`UPDATE workflow_steps SET spec = jsonb_set(spec, '{with,port}', '0') WHERE workflow_id = $1`, [
      id,
    ]);
    await lab.settle();
    expect((await lab.workflow(id)).steps[0]).toMatchObject({ state: 'failed', error: { code: 'INVALID_INPUT' } });
  });

  it('records an unknown throw as INTERNAL without copying its message anywhere', async () => {
    const lab = getLab();
    const id = await lab.start({ id: 'lab-throw', steps: [{ use: 'lab.throw' }] });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.steps[0]?.error?.code).toBe('INTERNAL');
    const stored = await lab.db.query<{ all: string }>(
      `SELECT (SELECT string_agg(coalesce(error::text, ''), ' ') FROM workflow_steps) ||
              (SELECT coalesce(error::text, '') FROM workflows) ||
              (SELECT string_agg(data::text, ' ') FROM events) AS all`,
    );
    expect(stored.rows[0]?.all).not.toContain(record.secret);
  });

  it('refuses a command kind a step did not declare in sends with INVALID_CONFIG', async () => {
    const lab = getLab();
    const id = await lab.start({ id: 'lab-undeclared', steps: [{ use: 'lab.undeclared' }] });
    await lab.settle();
    expect((await lab.workflow(id)).steps[0]).toMatchObject({ state: 'failed', error: { code: 'INVALID_CONFIG' } });
    const { rows } = await lab.db.query('SELECT id FROM commands');
    expect(rows).toHaveLength(0);
  });

  it('relays through the site agent with awaitCommand, once per attempt, and wakes at once when it settles', async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'ignore' });
    const id = await lab.start({ id: 'lab-relay', steps: [{ use: 'lab.relay', on: 'site' }] }, { batchId: 'bat_1' });
    await lab.compute.runDueWork();
    expect((await dueAt(lab))?.getTime()).toBe(lab.clock.now().getTime() + ENGINE_DEFAULTS.commandStepPollMs);
    lab.siteAgent.respond({ outcome: 'succeed' });
    await lab.siteAgent.poll();
    // The settle queued the workflow now, without waiting for the 2 s poll.
    expect((await dueAt(lab))?.getTime()).toBe(lab.clock.now().getTime());
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('succeeded');
    const { rows } = await lab.db.query<{ key: string; batch_id: string; target_node_id: string; workflow_id: string }>(
      'SELECT key, batch_id, target_node_id, workflow_id FROM commands',
    );
    expect(rows).toEqual([
      {
        key: stepCommandKey({ workflowId: id, stepId: 'main.1', attempt: 0 }),
        batch_id: 'bat_1',
        target_node_id: lab.nodeId,
        workflow_id: id,
      },
    ]);
    expect(record.runs.length).toBeGreaterThanOrEqual(2);
  });

  it("runs a relaying step again after awaitCommand's pollMs while its command is open, and at once when it settles", async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'ignore' });
    const id = await lab.start({
      id: 'lab-relay-poll',
      steps: [{ use: 'lab.relay', on: 'site', with: { pollMs: 30_000 } }],
    });
    await lab.compute.runDueWork();
    expect((await dueAt(lab))?.getTime()).toBe(lab.clock.now().getTime() + 30_000);
    lab.siteAgent.respond({ outcome: 'succeed' });
    await lab.siteAgent.poll();
    expect((await dueAt(lab))?.getTime()).toBe(lab.clock.now().getTime());
    await lab.settle();
    expect((await lab.workflow(id)).state).toBe('succeeded');
  });

  it('fails a relaying step whose awaitCommand pollMs is not a positive whole number, naming pollMs', async () => {
    const lab = getLab();
    const id = await lab.start({
      id: 'lab-relay-bad-poll',
      steps: [{ use: 'lab.relay', on: 'site', with: { pollMs: 0.5 } }],
    });
    await lab.settle();
    expect((await lab.workflow(id)).steps[0]).toMatchObject({ state: 'failed', error: { code: 'INVALID_INPUT' } });
    const { rows } = await lab.db.query('SELECT id FROM commands');
    expect(rows).toHaveLength(0);
  });

  it('sends a sequence together; its agent gets each after the one before it, and the step runs again at the end', async () => {
    const lab = getLab();
    const id = await lab.start({ id: 'lab-sequence', steps: [{ use: 'lab.sequence', on: 'site' }] });
    await lab.compute.runDueWork();
    const sent = await lab.db.query<{ key: string; after_key: string | null; state: string }>(
      'SELECT key, after_key, state FROM commands ORDER BY created_at, id',
    );
    const key = (k: string) => stepCommandKey({ workflowId: id, stepId: 'main.1', attempt: 0 }, k);
    expect(sent.rows).toEqual([
      { key: key('one'), after_key: null, state: 'pending' },
      { key: key('two'), after_key: key('one'), state: 'pending' },
      { key: key('three'), after_key: key('two'), state: 'pending' },
    ]);
    expect(record.runs).toHaveLength(1);
    // One poll, one command: the next is held until this one succeeded, and its success runs nothing.
    for (const answered of [1, 2]) {
      await lab.siteAgent.poll();
      expect(lab.siteAgent.answered).toHaveLength(answered);
      expect((await dueAt(lab))?.getTime()).toBe(lab.clock.now().getTime() + 30_000);
    }
    await lab.siteAgent.poll();
    expect(lab.siteAgent.answered.map((a) => a.key)).toEqual([key('one'), key('two'), key('three')]);
    expect((await dueAt(lab))?.getTime()).toBe(lab.clock.now().getTime());
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('succeeded');
    expect(record.runs).toHaveLength(2);
    expect((wf.steps[0]?.result as { commands?: string[] } | undefined)?.commands).toHaveLength(3);
    // What the second command carries was written once, with it.
    expect(
      (await lab.db.query("SELECT labels->>'sent-with' AS n FROM nodes WHERE id = $1", [lab.nodeId])).rows,
    ).toEqual([{ n: '1' }]);
  });

  it('cancels the rest of a sequence when one of its commands fails, and fails the step with that failure', async () => {
    const lab = getLab();
    lab.siteAgent.respond((command) =>
      command.key.endsWith(':two') ? { outcome: 'fail', reason: 'BMC busy' } : { outcome: 'succeed' },
    );
    const id = await lab.start({ id: 'lab-sequence-fail', steps: [{ use: 'lab.sequence', on: 'site' }] });
    await lab.settle();
    expect((await lab.workflow(id)).steps[0]).toMatchObject({
      state: 'failed',
      error: { code: 'DRIVER_ERROR', message: 'command lab.wipe failed: BMC busy' },
    });
    const { rows } = await lab.db.query<{ key: string; state: string; reason: string | null }>(
      'SELECT key, state, reason FROM commands ORDER BY created_at, id',
    );
    const key = (k: string) => stepCommandKey({ workflowId: id, stepId: 'main.1', attempt: 0 }, k);
    expect(rows).toEqual([
      { key: key('one'), state: 'succeeded', reason: null },
      { key: key('two'), state: 'failed', reason: 'BMC busy' },
      { key: key('three'), state: 'cancelled', reason: `after ${key('two')} failed` },
    ]);
    expect(lab.siteAgent.answered.map((a) => a.key)).toEqual([key('one'), key('two')]);
  });

  it('does not run the step again when a command that wakes only on failure succeeds: its next run sees it', async () => {
    const lab = getLab();
    const id = await lab.start({
      id: 'lab-sequence-quiet',
      steps: [{ use: 'lab.sequence', on: 'site', with: { quietLast: true } }],
    });
    await lab.compute.runDueWork();
    for (let i = 0; i < 3; i += 1) await lab.siteAgent.poll();
    expect(lab.siteAgent.answered).toHaveLength(3);
    expect((await dueAt(lab))?.getTime()).toBe(lab.clock.now().getTime() + 30_000);
    expect(record.runs).toHaveLength(1);
    await lab.settle();
    expect((await lab.workflow(id)).state).toBe('succeeded');
    expect(record.runs).toHaveLength(2);
  });

  it('turns a failed relayed command into DRIVER_ERROR with its reason', async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'fail', reason: 'BMC busy' });
    const id = await lab.start({ id: 'lab-relay-fail', steps: [{ use: 'lab.relay', on: 'site' }] });
    await lab.settle();
    expect((await lab.workflow(id)).steps[0]).toMatchObject({
      state: 'failed',
      error: { code: 'DRIVER_ERROR', message: 'command lab.wipe failed: BMC busy', reason: 'BMC busy' },
    });
  });

  it('skips a step whose when is false and runs one whose when holds on the node labels', async () => {
    const lab = getLab();
    await lab.reset({ labels: { nvswitch: 'true', 'gpu.model': 'H100' } });
    const id = await lab.start({
      id: 'lab-when',
      steps: [
        { use: 'lab.noop', with: { tag: 'a' }, when: 'nvswitch && gpu.model=H100' },
        { use: 'lab.noop', with: { tag: 'b' }, when: '!nvswitch' },
      ],
    });
    await lab.settle();
    expect(stepStates(await lab.workflow(id))).toEqual(['main.1:succeeded', 'main.2:skipped']);
  });
}
