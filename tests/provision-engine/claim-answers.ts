import type { ModuleContext, SqlExecutor } from 'better-compute/core';
import { expect, it } from 'vitest';
import { type EngineLab, lab as labRecord } from '../support/engine-lab';
import { workflowReconciler } from './direct-pass';

// The engine's plain reads of a node's agent session and its site's connected agent, answered by the worker's claim
// (it reads them with the workflow) for the transitions a pass plans right after it, and for a second after it once
// the pass ran a control-plane step (a plan decided on the session then checks it is still current).

// currentAgentSession's and connectedSiteAgents' statements.
const SESSION_READS = /FROM agent_sessions WHERE node_id = \$1|FROM nodes n JOIN agent_sessions s/;
// currentAgentSession's alone.
const NODE_SESSION_READS = /FROM agent_sessions WHERE node_id = \$1/;
// connectedSiteAgents' alone.
const SITE_AGENT_READS = /FROM nodes n JOIN agent_sessions s/;
// The workflow read again (readActiveWorkflow), which the claim read with the pass's item.
const WORKFLOW_READS = /FROM \(SELECT \* FROM workflows WHERE key = \$1/;

/** `db` with the statements matching `pattern` counted. */
function counting(db: SqlExecutor, pattern: RegExp): { sql: SqlExecutor; count: () => number } {
  let count = 0;
  const sql: SqlExecutor = {
    query: (text, params) => {
      if (pattern.test(text)) count += 1;
      return db.query(text, params);
    },
    transaction: (fn) =>
      db.transaction((tx) =>
        fn({
          query: (text, params) => {
            if (pattern.test(text)) count += 1;
            return tx.query(text, params);
          },
          transaction: (inner) => tx.transaction(inner),
        }),
      ),
  };
  return { sql, count: () => count };
}

/** One pass of the node's workflow as a worker's claim would run it (with its preload), on `sql`. */
async function claimedPass(lab: EngineLab, sql: SqlExecutor): Promise<void> {
  const build = workflowReconciler(lab).preload?.sql as (key: string, now: string) => string;
  const { rows } = await lab.db.query<{ v: unknown }>(
    `SELECT $2::timestamptz AS now, to_json(${build('$1::text', '$2::timestamptz')}) AS v`,
    [lab.nodeId, lab.clock.now()],
  );
  const ctx: ModuleContext = { ...lab.compute.context, sql, preloaded: rows[0]?.v };
  await workflowReconciler(lab)(lab.nodeId, ctx);
}

/** The nodes a step of the workflow sent its commands to. */
async function sentTo(lab: EngineLab, workflowId: string, stepId: string): Promise<string[]> {
  const { rows } = await lab.db.query<{ node_id: string }>(
    'SELECT node_id FROM commands WHERE workflow_id = $1 AND step_id = $2 ORDER BY created_at',
    [workflowId, stepId],
  );
  return rows.map((row) => row.node_id);
}

async function rejoinOf(lab: EngineLab, workflowId: string, stepId: string) {
  const { rows } = await lab.db.query<{ state: string; rejoin: { bootId: string | null } | null }>(
    'SELECT state, rejoin FROM workflow_steps WHERE workflow_id = $1 AND step_id = $2',
    [workflowId, stepId],
  );
  return rows[0];
}

export function claimAnswerScenarios(getLab: () => EngineLab) {
  it("a pass right after its claim sends a site step and a rejoin step, and sees the rejoin, without reading agents' sessions", async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'ignore' });
    lab.nodeAgent.respond({ outcome: 'ignore' });
    const id = await lab.start({ id: 'lab-claim-answers', steps: [{ use: 'lab.sitePing' }, { use: 'lab.reboot' }] });
    const { sql, count } = counting(lab.db, SESSION_READS);

    await claimedPass(lab, sql);
    expect(await sentTo(lab, id, 'main.1')).toEqual([lab.siteAgent.nodeId]);

    lab.siteAgent.respond({ outcome: 'succeed' });
    await lab.siteAgent.poll();
    await claimedPass(lab, sql);
    // The reboot's rejoin recorded the session the claim read: the node's boot before the reboot.
    expect(await rejoinOf(lab, id, 'main.2')).toMatchObject({
      state: 'waiting',
      rejoin: { bootId: lab.nodeAgent.bootId },
    });

    await lab.nodeAgent.rejoin({ bootId: 'boot-after-reboot' });
    await claimedPass(lab, sql);
    expect(await rejoinOf(lab, id, 'main.2')).toMatchObject({ state: 'succeeded' });
    expect((await lab.workflow(id)).state).toBe('succeeded');
    expect(count()).toBe(0);
  });

  it("reads the session again when it changed during a control-plane step's run: a reboot during the run is the one the rejoin waits past", async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'ignore' });
    const id = await lab.start({ id: 'lab-claim-stale', steps: [{ use: 'lab.duringRun' }, { use: 'lab.reboot' }] });
    // While the control-plane step runs, the node comes back with a new boot id: the claim's session is old news.
    labRecord.duringRun = async () => {
      await lab.nodeAgent.rejoin({ bootId: 'boot-during-run' });
      return null;
    };
    const { sql, count } = counting(lab.db, SESSION_READS);
    await claimedPass(lab, sql);
    expect(await rejoinOf(lab, id, 'main.2')).toMatchObject({
      state: 'waiting',
      rejoin: { bootId: 'boot-during-run' },
    });
    expect(count()).toBeGreaterThan(0);
  });

  it("a pass that ran a control-plane step takes the session from its claim, still current: the rejoin's start records it", async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'ignore' });
    lab.nodeAgent.respond({ outcome: 'ignore' });
    const id = await lab.start({
      id: 'lab-claim-after-relay',
      steps: [{ use: 'lab.relay', with: { siteAgentId: lab.siteAgent.nodeId } }, { use: 'lab.reboot' }],
    });
    await claimedPass(lab, lab.db);
    lab.siteAgent.respond({ outcome: 'succeed' });
    await lab.siteAgent.poll();
    // The pass on the relayed command's result: the run finds it; the reboot's start follows, its statement checking
    // that the session the claim read is still the node's.
    const { sql, count } = counting(lab.db, NODE_SESSION_READS);
    await claimedPass(lab, sql);
    expect(await rejoinOf(lab, id, 'main.2')).toMatchObject({
      state: 'waiting',
      rejoin: { bootId: lab.nodeAgent.bootId },
    });
    expect(count()).toBe(0);
  });

  it('a pass that ran a control-plane step still takes the site agent from its claim, made moments before', async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'ignore' });
    const id = await lab.start({ id: 'lab-claim-after-run', steps: [{ use: 'lab.noop' }, { use: 'lab.sitePing' }] });
    const { sql, count } = counting(lab.db, SITE_AGENT_READS);
    await claimedPass(lab, sql);
    expect(await sentTo(lab, id, 'main.2')).toEqual([lab.siteAgent.nodeId]);
    expect(count()).toBe(0);
  });

  it("plans on through a run's write of the node's labels, when it says what it leaves: the `when` after it decided on them, in the statement that writes them", async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'ignore' });
    const id = await lab.start({
      id: 'lab-foreseen-labels',
      steps: [
        { use: 'lab.labelWith', with: { label: 'gpu' } },
        { use: 'lab.sitePing', when: '!gpu' },
        { use: 'lab.sitePing', when: 'gpu' },
      ],
    });
    const { sql, count } = counting(lab.db, WORKFLOW_READS);
    await claimedPass(lab, sql);
    const wf = await lab.workflow(id);
    expect(wf.steps.map((s) => s.state)).toEqual(['succeeded', 'skipped', 'waiting']);
    const { rows } = await lab.db.query<{ labels: Record<string, string> }>('SELECT labels FROM nodes WHERE id = $1', [
      lab.nodeId,
    ]);
    expect(rows[0]?.labels).toMatchObject({ gpu: 'yes' });
    expect(count()).toBe(0);
  });

  it('runs the step again when the node changed after its run read it, and decides on the labels the new run leaves', async () => {
    const lab = getLab();
    lab.siteAgent.respond({ outcome: 'ignore' });
    let changes = 0;
    labRecord.duringRun = async () => {
      // Once, while the first run is under way: an operator's label lands between its read and the engine's write.
      if (changes++ > 0) return null;
      await lab.db.query(`UPDATE nodes SET labels = labels || '{"rack":"r7"}'::jsonb WHERE id = $1`, [lab.nodeId]);
      return null;
    };
    const id = await lab.start({
      id: 'lab-foreseen-labels-changed',
      steps: [
        { use: 'lab.labelWith', with: { label: 'gpu' } },
        { use: 'lab.sitePing', when: 'gpu && rack=r7' },
      ],
    });
    await claimedPass(lab, lab.db);
    const wf = await lab.workflow(id);
    expect(labRecord.runs.filter((r) => r.action === 'lab.labelWith' && r.workflowId === id)).toHaveLength(2);
    expect(wf.steps.map((s) => s.state)).toEqual(['succeeded', 'waiting']);
    const { rows } = await lab.db.query<{ labels: Record<string, string> }>('SELECT labels FROM nodes WHERE id = $1', [
      lab.nodeId,
    ]);
    // The operator's label is kept: the first run's write, read before it, never landed.
    expect(rows[0]?.labels).toMatchObject({ gpu: 'yes', rack: 'r7' });
  });
}
