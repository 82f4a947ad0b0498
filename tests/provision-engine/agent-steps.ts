import type { ModuleContext, SqlExecutor } from 'better-compute/core';
import { bootLeaseHolder } from 'better-compute/core/kernel';
import { ENGINE_DEFAULTS, pauseWorkflow, resumeWorkflow } from 'better-compute/provision';
import { createFakeAgent, insertNode, settle } from 'better-compute/testkit';
import { expect, it } from 'vitest';
import { type EngineLab, lab as record, stepStates } from '../support/engine-lab';
import { workflowReconciler } from './direct-pass';

interface CommandRow {
  id: string;
  node_id: string;
  kind: string;
  key: string;
  state: string;
  not_after: Date;
  workflow_id: string;
  step_id: string;
  target_node_id: string | null;
  batch_id: string | null;
  wake_kind: string;
  wake_key: string;
  reason: string | null;
}

async function commands(lab: EngineLab): Promise<CommandRow[]> {
  return (await lab.db.query<CommandRow>('SELECT * FROM commands ORDER BY created_at, key')).rows;
}

/** One workflow pass, as a worker's would run it, on `sql` that counts the transactions and records the statements. */
async function countedPass(lab: EngineLab) {
  const seen = { transactions: 0, statements: [] as string[] };
  const db = lab.compute.context.sql;
  const sql = new Proxy(db, {
    get(target, name, receiver) {
      if (name === 'query') {
        return (text: string, params?: unknown[]) => {
          seen.statements.push(text);
          return target.query(text, params);
        };
      }
      if (name === 'transaction') {
        return (fn: Parameters<SqlExecutor['transaction']>[0]) => {
          seen.transactions += 1;
          return target.transaction(fn);
        };
      }
      const value = Reflect.get(target, name, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const ctx: ModuleContext = { ...lab.compute.context, sql, item: { kind: 'workflow', key: lab.nodeId } };
  await workflowReconciler(lab)(lab.nodeId, ctx);
  return seen;
}

/** The transaction ids (xmin) of the workflow's step-start events and of its commands. */
async function writers(lab: EngineLab, id: string) {
  const { rows } = await lab.db.query<{ started: string[]; commands: string[] }>(
    `SELECT ARRAY(SELECT xmin::text FROM events WHERE subject = $1 AND type = 'workflow.step.started') AS started,
       ARRAY(SELECT xmin::text FROM commands WHERE workflow_id = $2 ORDER BY key) AS commands`,
    [`workflow/${id}`, id],
  );
  return rows[0];
}

export function agentStepScenarios(getLab: () => EngineLab) {
  it('sends exactly one command keyed wf:<id>:<step>, with the deadline as not_after and a wake of the workflow', async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'succeed', result: { pong: 1 } });
    const id = await lab.start({ id: 'lab-agent', steps: [{ use: 'lab.ping', with: { n: 3 } }] });
    const startedAt = lab.clock.now().getTime();
    await lab.settle();
    const [command, ...others] = await commands(lab);
    expect(others).toHaveLength(0);
    expect(command).toMatchObject({
      node_id: lab.nodeId,
      kind: 'lab.ping',
      key: `wf:${id}:main.1`,
      workflow_id: id,
      step_id: 'main.1',
      wake_kind: 'workflow',
      wake_key: lab.nodeId,
      target_node_id: null,
      state: 'succeeded',
    });
    expect(command?.not_after.getTime()).toBe(startedAt + 5 * 60_000);
    const wf = await lab.workflow(id);
    expect(wf.steps[0]).toMatchObject({ state: 'succeeded', result: { pong: 1 }, commandId: command?.id });
  });

  it("makes a waiting step's looks in the claim while its command is open: no pass until it settles", async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'ignore' });
    const id = await lab.start({ id: 'lab-park', steps: [{ use: 'lab.ping' }] });
    const workflowItem = async () =>
      (
        await lab.db.query<{ not_before: Date; park_on: Record<string, unknown> | null }>(
          "SELECT not_before, park_on FROM work_items WHERE kind = 'workflow'",
        )
      ).rows[0];
    await lab.compute.runDueWork();
    await lab.nodeAgent.poll();
    const [command] = await commands(lab);
    // The first look is a pass (the send wrote its own requeue); it finds the command open and parks the item on it.
    lab.clock.advance(ENGINE_DEFAULTS.workflowPollMs);
    expect(await lab.compute.runDueWork()).toBe(1);
    expect((await workflowItem())?.park_on).toMatchObject({ workflowId: id, commandId: command?.id });
    // The next looks are the claim's: nothing runs, and the item is due again a poll later.
    for (let look = 0; look < 3; look += 1) {
      lab.clock.advance(ENGINE_DEFAULTS.workflowPollMs);
      expect(await lab.compute.runDueWork()).toBe(0);
      expect((await workflowItem())?.not_before.getTime()).toBe(
        lab.clock.now().getTime() + ENGINE_DEFAULTS.workflowPollMs,
      );
    }
    // The result wakes it (and unparks it): the step settles at once.
    const ref = { commandId: command?.id as string, nodeId: lab.nodeId };
    await lab.compute.commands.ackCommand(lab.db, ref);
    await lab.compute.commands.startCommand(lab.db, ref);
    expect(await lab.compute.runDueWork()).toBe(0);
    await lab.compute.commands.completeCommand(lab.db, {
      commandId: command?.id as string,
      nodeId: lab.nodeId,
      result: new TextEncoder().encode(JSON.stringify({ pong: 9 })),
    });
    expect((await workflowItem())?.park_on).toBeNull();
    expect(await lab.compute.runDueWork()).toBe(1);
    expect((await lab.workflow(id)).steps[0]).toMatchObject({ state: 'succeeded', result: { pong: 9 } });
  });

  it('adopts a command already under the step key instead of sending a second one', async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'succeed', result: { pong: 2 } });
    const id = await lab.start({ id: 'lab-adopt', steps: [{ use: 'lab.ping' }] });
    // Sent before the engine looked (by an earlier run of this step, say): the engine must find it, not add another.
    const existing = await lab.db.transaction((tx) =>
      lab.compute.context.commands.enqueue(tx, {
        nodeId: lab.nodeId,
        kind: 'lab.ping',
        payload: { n: 1 },
        key: `wf:${id}:main.1`,
        notAfter: new Date(lab.clock.now().getTime() + 60_000),
        workflowId: id,
        stepId: 'main.1',
        wake: { kind: 'workflow', key: lab.nodeId },
      }),
    );
    await lab.settle();
    expect((await commands(lab)).map((c) => [c.id, c.state])).toEqual([[existing.id, 'succeeded']]);
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('succeeded');
    expect(wf.steps[0]).toMatchObject({ state: 'succeeded', result: { pong: 2 }, commandId: existing.id });
  });

  it('sends no command for a transition a verb made stale, and sends it once the workflow resumes', async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'succeed' });
    record.duringRun = async (workflowId) => {
      await pauseWorkflow(lab.compute.context, { workflowId });
    };
    const id = await lab.start({ id: 'lab-stale-send', steps: [{ use: 'lab.duringRun' }, { use: 'lab.ping' }] });
    await lab.settle();
    expect(stepStates(await lab.workflow(id))).toEqual(['main.1:succeeded', 'main.2:pending']);
    expect(await commands(lab)).toEqual([]);
    await resumeWorkflow(lab.compute.context, { workflowId: id });
    await lab.settle();
    expect((await lab.workflow(id)).state).toBe('succeeded');
    expect((await commands(lab)).map((c) => [c.key, c.state])).toEqual([[`wf:${id}:main.2`, 'succeeded']]);
  });

  it('looks at a waiting agent step again after workflowPollMs, and at once when its command settles', async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'ignore' });
    await lab.start({ id: 'lab-poll', steps: [{ use: 'lab.ping' }] });
    await lab.compute.runDueWork();
    const due = await lab.db.query<{ not_before: Date }>("SELECT not_before FROM work_items WHERE kind = 'workflow'");
    expect(due.rows[0]?.not_before.getTime()).toBe(lab.clock.now().getTime() + ENGINE_DEFAULTS.workflowPollMs);
    lab.nodeAgent.respond({ outcome: 'succeed' });
    await lab.nodeAgent.poll();
    const woken = await lab.db.query<{ not_before: Date }>("SELECT not_before FROM work_items WHERE kind = 'workflow'");
    expect(woken.rows[0]?.not_before.getTime()).toBe(lab.clock.now().getTime());
  });

  it('sends a site step to the site agent of the node, naming the machine as targetNodeId', async () => {
    const lab = getLab();
    await lab.start({ id: 'lab-site', steps: [{ use: 'lab.sitePing' }] });
    await lab.settle();
    expect(await commands(lab)).toMatchObject([
      { node_id: lab.siteAgent.nodeId, target_node_id: lab.nodeId, kind: 'lab.ping' },
    ]);
    expect(lab.siteAgent.answered).toHaveLength(1);
  });

  it('starts a site step and sends its command by one statement, the site agent read before it, in no transaction', async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'ignore' });
    const id = await lab.start({ id: 'lab-site-one-statement', steps: [{ use: 'lab.sitePing' }] });
    const seen = await countedPass(lab);
    expect(seen.transactions).toBe(0);
    expect(seen.statements.some((text) => /JOIN agent_sessions/.test(text))).toBe(true);
    const [command] = await commands(lab);
    expect(command).toMatchObject({ node_id: lab.siteAgent.nodeId, target_node_id: lab.nodeId, state: 'pending' });
    const seenWriters = await writers(lab, id);
    expect(seenWriters?.commands).toEqual(seenWriters?.started);
    expect(stepStates(await lab.workflow(id))).toEqual(['main.1:waiting']);
  });

  it('waits for a site agent without a transaction while none is connected, and sends once one is', async () => {
    const lab = getLab();
    await lab.siteAgent.disconnect();
    const id = await lab.start({ id: 'lab-site-none', steps: [{ use: 'lab.sitePing' }] });
    const seen = await countedPass(lab);
    expect(seen.transactions).toBe(0);
    expect(await commands(lab)).toHaveLength(0);
    expect(stepStates(await lab.workflow(id))).toEqual(['main.1:running']);
    await lab.siteAgent.connect();
    lab.clock.advance(ENGINE_DEFAULTS.commandStepPollMs);
    await lab.settle();
    expect((await lab.workflow(id)).state).toBe('succeeded');
    expect(lab.siteAgent.answered).toHaveLength(1);
  });

  it('sends site steps to the boot-lease holder; once it leaves, to the agent the lease moved to, not back', async () => {
    const lab = getLab();
    const otherNode = await insertNode(lab.db, { siteId: lab.siteId, kind: 'site-agent' }, lab.clock);
    const other = createFakeAgent(lab.compute, { nodeId: otherNode, role: 'site' });
    await other.connect();
    lab.clock.advance(1000);
    await other.poll(); // seen after the holder: most recently seen first would pick it
    const agents = () => [...lab.agents, other];
    const runSitePing = async (id: string) => {
      const workflowId = await lab.start({ id, steps: [{ use: 'lab.sitePing' }] });
      await settle(lab.compute, { clock: lab.clock, agents: agents() });
      expect((await lab.workflow(workflowId)).state).toBe('succeeded');
      return (await commands(lab)).filter((c) => c.step_id !== null).map((c) => c.node_id);
    };
    expect((await bootLeaseHolder(lab.db, lab.siteId, { now: lab.clock.now() }))?.nodeId).toBe(lab.siteAgent.nodeId);
    expect(await runSitePing('lab-lease-1')).toEqual([lab.siteAgent.nodeId]);
    await lab.siteAgent.disconnect();
    expect(await runSitePing('lab-lease-2')).toEqual([lab.siteAgent.nodeId, otherNode]);
    await lab.siteAgent.connect(); // the former holder returns
    lab.clock.advance(1000);
    await lab.siteAgent.poll();
    expect(await runSitePing('lab-lease-3')).toEqual([lab.siteAgent.nodeId, otherNode, otherNode]);
  });

  it('fails a site step with NO_SITE_AGENT when no site agent is connected before its deadline', async () => {
    const lab = getLab();
    await lab.siteAgent.disconnect();
    const id = await lab.start({ id: 'lab-no-site', steps: [{ use: 'lab.sitePing', timeout: '30s' }] });
    await lab.settle();
    expect((await lab.workflow(id)).steps[0]).toMatchObject({ state: 'failed', error: { code: 'NO_SITE_AGENT' } });
    expect(await commands(lab)).toHaveLength(0);
  });

  it('holds site steps while the site agent is away, then finishes them without duplicates', async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'ignore' });
    const id = await lab.start({
      id: 'lab-away',
      steps: [{ use: 'lab.sitePing' }, { use: 'lab.sitePing', with: { n: 2 } }],
    });
    await lab.compute.runDueWork();
    await lab.siteAgent.disconnect();
    lab.clock.advance(60_000);
    await lab.compute.runDueWork();
    lab.clock.advance(60_000);
    await lab.compute.runDueWork();
    expect(stepStates(await lab.workflow(id))).toEqual(['main.1:waiting', 'main.2:pending']);
    await lab.siteAgent.connect();
    lab.siteAgent.respond({ outcome: 'succeed' });
    await lab.settle();
    expect((await lab.workflow(id)).state).toBe('succeeded');
    const sent = await commands(lab);
    expect(sent.map((c) => c.key)).toEqual([`wf:${id}:main.1`, `wf:${id}:main.2`]);
    expect(lab.siteAgent.answered.map((a) => a.key)).toEqual([`wf:${id}:main.1`, `wf:${id}:main.2`]);
  });

  it('turns failed, rejected, expired and cancelled commands into the matching step codes', async () => {
    const lab = getLab();
    const outcomes: [string, string][] = [];
    lab.nodeAgent.respond({ outcome: 'fail', reason: 'disk busy' });
    let id = await lab.start({ id: 'lab-cf', steps: [{ use: 'lab.ping' }] });
    await lab.settle();
    outcomes.push([
      (await lab.workflow(id)).steps[0]?.error?.code as string,
      (await lab.workflow(id)).steps[0]?.error?.message as string,
    ]);

    lab.nodeAgent.respond({ outcome: 'reject', reason: 'unsupported' });
    id = await lab.start({ id: 'lab-cr', steps: [{ use: 'lab.ping' }] });
    await lab.settle();
    outcomes.push([
      (await lab.workflow(id)).steps[0]?.error?.code as string,
      (await lab.workflow(id)).steps[0]?.error?.message as string,
    ]);

    lab.nodeAgent.respond({ outcome: 'ignore' });
    id = await lab.start({ id: 'lab-ce', steps: [{ use: 'lab.ping' }] });
    await lab.compute.runDueWork();
    lab.clock.advance(6 * 60_000); // the worker was away past the command's not_after
    await lab.settle();
    outcomes.push([(await lab.workflow(id)).steps[0]?.error?.code as string, '']);

    id = await lab.start({ id: 'lab-cc', steps: [{ use: 'lab.ping' }] });
    await lab.compute.runDueWork();
    const commandId = (await lab.workflow(id)).steps[0]?.commandId as string;
    await lab.db.transaction((tx) => lab.compute.commands.cancel(tx, commandId, 'operator'));
    await lab.settle();
    outcomes.push([(await lab.workflow(id)).steps[0]?.error?.code as string, '']);

    expect(outcomes).toEqual([
      ['COMMAND_FAILED', 'command lab.ping failed: disk busy'],
      ['COMMAND_REJECTED', 'command lab.ping rejected: unsupported'],
      ['COMMAND_EXPIRED', ''],
      ['COMMAND_CANCELLED', ''],
    ]);
  });

  it('fails an agent step at its deadline with TIMEOUT and cancels its command (its parked looks end there)', async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'silent' });
    const id = await lab.start({ id: 'lab-silent', steps: [{ use: 'lab.ping', timeout: '45s' }] });
    await lab.settle();
    expect((await lab.workflow(id)).steps[0]).toMatchObject({ state: 'failed', error: { code: 'TIMEOUT' } });
    expect(await commands(lab)).toMatchObject([{ state: 'cancelled' }]);
  });

  it('puts the workflow batch on destructive commands only', async () => {
    const lab = getLab();
    const id = await lab.start(
      { id: 'lab-batch', steps: [{ use: 'lab.ping' }, { use: 'lab.wipeDisks' }] },
      { batchId: 'bat_7' },
    );
    await lab.nodeAgent.rejoin({ role: 'ramdisk' });
    await lab.settle();
    expect((await lab.workflow(id)).state).toBe('succeeded');
    expect((await commands(lab)).map((c) => [c.kind, c.batch_id])).toEqual([
      ['lab.ping', null],
      ['lab.wipe', 'bat_7'],
    ]);
  });

  it("succeeds an await: 'rejoin' step when the agent comes back with a new boot id, whatever the command reported", async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'fail', reason: 'connection reset by reboot' });
    const id = await lab.start({ id: 'lab-rejoin', steps: [{ use: 'lab.reboot' }] });
    await lab.compute.runDueWork();
    await lab.nodeAgent.poll();
    await lab.compute.runDueWork();
    expect(stepStates(await lab.workflow(id))).toEqual(['main.1:waiting']);
    const before = lab.nodeAgent.bootId;
    await lab.nodeAgent.rejoin({ bootId: 'boot-2' });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('succeeded');
    expect(wf.steps[0]?.result).toEqual({ bootId: 'boot-2', role: 'node' });
    expect(before).not.toBe('boot-2');
  });

  it("looks at a rejoin step's agent session without a transaction, and writes nothing while it has not come back", async () => {
    const lab = getLab();
    const id = await lab.start({ id: 'lab-rejoin-look', steps: [{ use: 'lab.reboot' }] });
    await lab.compute.runDueWork();
    await lab.nodeAgent.poll();
    await lab.compute.runDueWork();
    expect(stepStates(await lab.workflow(id))).toEqual(['main.1:waiting']);
    const revision = (await lab.db.query<{ revision: string }>('SELECT revision FROM workflows WHERE id = $1', [id]))
      .rows[0]?.revision;
    lab.clock.advance(ENGINE_DEFAULTS.workflowPollMs);
    const seen = await countedPass(lab);
    expect(seen.transactions).toBe(0);
    expect(seen.statements.some((text) => /FROM agent_sessions/.test(text))).toBe(true);
    const after = await lab.db.query<{ revision: string }>('SELECT revision FROM workflows WHERE id = $1', [id]);
    expect(after.rows[0]?.revision).toBe(revision);
    await lab.nodeAgent.rejoin({ bootId: 'boot-after-look' });
    await lab.settle();
    expect((await lab.workflow(id)).steps[0]?.result).toMatchObject({ bootId: 'boot-after-look' });
  });

  it('succeeds a rejoin when the agent comes back in a new role with the same boot id', async () => {
    const lab = getLab();
    const id = await lab.start({ id: 'lab-rejoin-role', steps: [{ use: 'lab.reboot' }] });
    await lab.compute.runDueWork();
    await lab.nodeAgent.rejoin({ bootId: lab.nodeAgent.bootId, role: 'provisioned' });
    await lab.settle();
    expect((await lab.workflow(id)).steps[0]?.result).toMatchObject({ role: 'provisioned' });
  });

  it('fails a rejoin only at its deadline, with REJOIN_TIMEOUT, and then runs its onFailure step', async () => {
    const lab = getLab();
    const id = await lab.start({
      id: 'lab-rejoin-timeout',
      drivers: { power: { name: 'redfish' } },
      steps: [
        {
          use: 'lab.reboot',
          timeout: '15m',
          onFailure: { use: 'power.setPower', on: 'site', with: { action: 'reset' } },
        },
      ],
    });
    const started = lab.clock.now().getTime();
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('failed');
    expect(wf.steps[0]).toMatchObject({ state: 'failed', error: { code: 'REJOIN_TIMEOUT' } });
    expect(wf.steps[1]).toMatchObject({ stepId: 'main.1.on-failure', state: 'succeeded' });
    expect(lab.clock.now().getTime() - started).toBe(15 * 60_000);
  });
}
