import type { ModuleContext, SqlExecutor } from 'better-compute/core';
import { pauseWorkflow } from 'better-compute/provision';
import { expect, it } from 'vitest';
import type { EngineLab } from '../support/engine-lab';
import { firstOfTwoAnswered, workflowReconciler } from './direct-pass';

/** `db` with its reads of the workflow (the reconciler's own `SELECT w.*, …`) counted. */
function countingWorkflowReads(db: SqlExecutor): { sql: SqlExecutor; reads: () => number } {
  let reads = 0;
  const sql = new Proxy(db, {
    get(target, name, receiver) {
      if (name === 'query') {
        return (text: string, params?: unknown[]) => {
          if (/^\s*SELECT w\.\*/.test(text)) reads += 1;
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
  const build = workflowReconciler(lab).preload?.sql as (key: string) => string;
  const { rows } = await lab.db.query<{ v: unknown }>(`SELECT to_json(${build('$1::text')}) AS v`, [key]);
  return rows[0]?.v;
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
