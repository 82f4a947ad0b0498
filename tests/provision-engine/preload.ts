import type { ModuleContext, SqlExecutor } from 'better-compute/core';
import { pauseWorkflow } from 'better-compute/provision';
import { expect, it } from 'vitest';
import type { EngineLab } from '../support/engine-lab';
import { firstOfTwoAnswered, workflowReconciler } from './direct-pass';

/** `db` with its reads of the workflow (the reconciler's own `SELECT w.*, …`, or `pattern`) counted. */
function countingWorkflowReads(
  db: SqlExecutor,
  pattern = /^\s*SELECT w\.\*/,
): { sql: SqlExecutor; reads: () => number } {
  let reads = 0;
  const sql = new Proxy(db, {
    get(target, name, receiver) {
      if (name === 'query') {
        return (text: string, params?: unknown[]) => {
          if (pattern.test(text)) reads += 1;
          return target.query(text, params);
        };
      }
      const value = Reflect.get(target, name, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { sql, reads: () => reads };
}

async function preloadOf(lab: EngineLab, key: string): Promise<unknown> {
  const build = workflowReconciler(lab).preload?.sql as (key: string, now: string) => string;
  // now is selected too, so the parameter is used whether or not a module's preload reads it.
  const sql = `SELECT $2::timestamptz AS now, to_json(${build('$1::text', '$2::timestamptz')}) AS v`;
  const { rows } = await lab.db.query<{ v: unknown }>(sql, [key, lab.clock.now()]);
  return rows[0]?.v;
}

// awaitCommand's own lookup of a step's command (the command queue's findByKey).
const COMMAND_LOOKUP = /FROM commands WHERE node_id = \$1 AND key = \$2/;

/** Starts `steps` of `lab.relay`, runs the pass that sends the first command, and has the site agent answer it. */
async function relayAnswered(lab: EngineLab, profileId: string, keys: string[]): Promise<string> {
  lab.siteAgent.respond({ outcome: 'ignore' });
  const id = await lab.start({ id: profileId, steps: keys.map((key) => ({ use: 'lab.relay', with: { key } })) });
  await lab.compute.runDueWork();
  lab.siteAgent.respond({ outcome: 'succeed', result: { wiped: true } });
  await lab.siteAgent.poll();
  return id;
}

async function relayedKeys(lab: EngineLab, workflowId: string): Promise<string[]> {
  const { rows } = await lab.db.query<{ key: string }>(
    'SELECT key FROM commands WHERE workflow_id = $1 ORDER BY created_at, id',
    [workflowId],
  );
  return rows.map((row) => row.key);
}

export function preloadScenarios(getLab: () => EngineLab) {
  it('a pass on a preloaded claim plans from the preload, command result included, without reading the workflow', async () => {
    const lab = getLab();
    // The agent answers; the engine has not looked yet: what the claim would preload now carries the result.
    const id = await firstOfTwoAnswered(lab, 'lab-preload', { pong: 7 });
    const preloaded = await preloadOf(lab, lab.nodeId);
    expect(preloaded).toMatchObject({ id, state: 'running', in_flight_command: { state: 'succeeded' } });

    const { sql, reads } = countingWorkflowReads(lab.db);
    const ctx: ModuleContext = { ...lab.compute.context, sql, preloaded };
    await workflowReconciler(lab)(lab.nodeId, ctx);
    expect(reads()).toBe(0);
    const wf = await lab.workflow(id);
    expect(wf.steps.map((s) => [s.stepId, s.state])).toEqual([
      ['main.1', 'succeeded'],
      ['main.2', 'waiting'],
    ]);
    expect(wf.steps[0]?.result).toEqual({ pong: 7 });

    // Without a preload the same pass reads the workflow itself (what the count above would have seen).
    await lab.nodeAgent.poll();
    await workflowReconciler(lab)(lab.nodeId, { ...lab.compute.context, sql });
    expect(reads()).toBe(1);
    expect((await lab.workflow(id)).state).toBe('succeeded');
  });

  it('a preload that found no active workflow ends the pass at once; the key of a finished one preloads null', async () => {
    const lab = getLab();
    lab.nodeAgent.respond({ outcome: 'succeed' });
    const id = await lab.start({ id: 'lab-preload-done', steps: [{ use: 'lab.ping' }] });
    await lab.settle();
    expect((await lab.workflow(id)).state).toBe('succeeded');
    expect(await preloadOf(lab, lab.nodeId)).toBeNull();
    const { sql, reads } = countingWorkflowReads(lab.db);
    const result = await workflowReconciler(lab)(lab.nodeId, { ...lab.compute.context, sql, preloaded: null });
    expect(result).toBeUndefined();
    expect(reads()).toBe(0);
  });

  it("a relaying step's run on its command's result takes the command from the claim, and a step the pass starts sends without a lookup", async () => {
    const lab = getLab();
    const id = await relayAnswered(lab, 'lab-preload-relay', ['a', 'b']);
    const preloaded = await preloadOf(lab, lab.nodeId);
    expect(preloaded).toMatchObject({
      step_reads: { commands: [{ key: `wf:${id}:main.1#0:a`, state: 'succeeded', result: expect.any(String) }] },
    });
    const { sql, reads } = countingWorkflowReads(lab.db, COMMAND_LOOKUP);
    await workflowReconciler(lab)(lab.nodeId, { ...lab.compute.context, sql, preloaded });
    // main.1 settled from the preloaded result; main.2, started by this pass, had sent nothing: neither looked.
    expect(reads()).toBe(0);
    const wf = await lab.workflow(id);
    expect(wf.steps.map((s) => [s.stepId, s.state])).toEqual([
      ['main.1', 'succeeded'],
      ['main.2', 'running'],
    ]);
    expect(await relayedKeys(lab, id)).toEqual([`wf:${id}:main.1#0:a`, `wf:${id}:main.2#0:b`]);

    // Without a preload the run on the next result looks its command up, and the workflow ends the same.
    await lab.siteAgent.poll();
    await workflowReconciler(lab)(lab.nodeId, { ...lab.compute.context, sql });
    expect(reads()).toBe(1);
    expect((await lab.workflow(id)).state).toBe('succeeded');
    expect(await relayedKeys(lab, id)).toHaveLength(2);
  });

  it("a preload read before the step's command was sent is not taken for a later attempt's, nor sends it twice", async () => {
    const lab = getLab();
    const id = await relayAnswered(lab, 'lab-preload-repeat', ['a']);
    // What the claim read while the command was still open, handed to a pass after it: the run sees it open, waits,
    // and the settle's wake brings a pass that sees the result; nothing is sent again meanwhile.
    const { rows } = await lab.db.query<{ state: string }>('SELECT state FROM commands WHERE workflow_id = $1', [id]);
    expect(rows.map((row) => row.state)).toEqual(['succeeded']);
    await lab.db.query("UPDATE commands SET state = 'dispatched', result = NULL WHERE workflow_id = $1", [id]);
    const openPreload = await preloadOf(lab, lab.nodeId);
    await lab.db.query("UPDATE commands SET state = 'succeeded' WHERE workflow_id = $1", [id]);
    await workflowReconciler(lab)(lab.nodeId, { ...lab.compute.context, preloaded: openPreload });
    expect((await lab.workflow(id)).steps[0]?.state).toBe('running');
    expect(await relayedKeys(lab, id)).toEqual([`wf:${id}:main.1#0:a`]);
    await lab.settle();
    expect((await lab.workflow(id)).state).toBe('succeeded');
    expect(await relayedKeys(lab, id)).toEqual([`wf:${id}:main.1#0:a`]);
  });

  it("reads a step's commands with the claim only up to 16, none of another attempt, none with a result over 64 KiB", async () => {
    const lab = getLab();
    const id = await relayAnswered(lab, 'lab-preload-cap', ['a']);
    const commandsRead = async () =>
      ((await preloadOf(lab, lab.nodeId)) as { step_reads: { commands: { key: string }[] | null } }).step_reads
        .commands;
    const addCommands = async (keys: string[], result: Buffer | null = null) => {
      for (const key of keys) {
        await lab.db.query(
          `INSERT INTO commands (id, tenant_id, node_id, kind, payload, key, state, not_after, workflow_id, step_id,
             result, created_at, updated_at)
           VALUES ($1, 'root', $2, 'lab.wipe', '{}'::jsonb, $3, 'succeeded', $4, $5, 'main.1', $6, $4, $4)`,
          [
            `cmd_${key.replace(/[^a-z0-9]/g, '')}${keys.length}`,
            lab.siteAgent.nodeId,
            key,
            lab.clock.now(),
            id,
            result,
          ],
        );
      }
    };
    // An earlier attempt's command is not this attempt's.
    await addCommands([`wf:${id}:main.1#1:old`]);
    expect((await commandsRead())?.map((c) => c.key)).toEqual([`wf:${id}:main.1#0:a`]);
    await addCommands(Array.from({ length: 15 }, (_, i) => `wf:${id}:main.1#0:poll-${i}`));
    expect(await commandsRead()).toHaveLength(16);
    await addCommands([`wf:${id}:main.1#0:poll-15`]);
    expect(await commandsRead()).toBeNull();
    // Too many to read with the claim: the run looks its command up itself, and settles the same.
    const { sql, reads } = countingWorkflowReads(lab.db, COMMAND_LOOKUP);
    await workflowReconciler(lab)(lab.nodeId, {
      ...lab.compute.context,
      sql,
      preloaded: await preloadOf(lab, lab.nodeId),
    });
    expect(reads()).toBe(1);
    expect((await lab.workflow(id)).state).toBe('succeeded');
  });

  it('a result over 64 KiB keeps the commands out of the claim', async () => {
    const lab = getLab();
    const id = await relayAnswered(lab, 'lab-preload-large', ['a']);
    await lab.db.query('UPDATE commands SET result = $2 WHERE workflow_id = $1', [id, Buffer.alloc(65_537, 1)]);
    const preloaded = (await preloadOf(lab, lab.nodeId)) as { step_reads: { commands: unknown } };
    expect(preloaded.step_reads.commands).toBeNull();
  });

  it('a stale preload (a verb changed the workflow since) is read again, and the verb wins', async () => {
    const lab = getLab();
    const id = await firstOfTwoAnswered(lab, 'lab-preload-stale', { pong: 1 });
    const preloaded = await preloadOf(lab, lab.nodeId);
    await pauseWorkflow(lab.compute.context, { workflowId: id });
    const { sql, reads } = countingWorkflowReads(lab.db);
    await workflowReconciler(lab)(lab.nodeId, { ...lab.compute.context, sql, preloaded });
    expect(reads()).toBeGreaterThan(0);
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('paused');
    expect(wf.steps.map((s) => [s.stepId, s.state])).toEqual([
      ['main.1', 'succeeded'],
      ['main.2', 'pending'],
    ]);
  });
}
