import type { ModuleContext, SqlExecutor } from 'better-compute/core';
import { SqlError } from 'better-compute/core';
import { provisionModule } from 'better-compute/provision';
import { expect, it } from 'vitest';
import { type EngineLab, labSteps, lab as record } from '../support/engine-lab';

/** `db` whose reads of a workflow with its steps' preloads fail as a broken preload's SQL would (undefined_function). */
function brokenPreloadReads(db: SqlExecutor): SqlExecutor {
  return new Proxy(db, {
    get(target, name, receiver) {
      if (name === 'query') {
        return (text: string, params?: unknown[]) => {
          if (text.includes('AS step_preloads')) {
            return Promise.reject(
              new SqlError('function nope() does not exist', {
                reason: 'undefined-object',
                sqlState: '42883',
                cause: undefined,
              }),
            );
          }
          return target.query(text, params);
        };
      }
      const value = Reflect.get(target, name, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

export function stepPreloadScenarios(getLab: () => EngineLab) {
  it("hands a step what its preload read with the workflow, on its first run and on each re-run, at the engine's time", async () => {
    const lab = getLab();
    record.waitMs = 5_000;
    record.preloadedNotReady = 1;
    // lab.wait runs first and waits: the pass that settles it (on a claim that read lab.preloaded as the step next)
    // starts lab.preloaded, whose first run waits too; the third pass re-runs it.
    const id = await lab.start({ id: 'lab-step-preload', steps: [{ use: 'lab.wait' }, { use: 'lab.preloaded' }] });
    await lab.compute.runDueWork();
    record.ready = true;
    lab.clock.advance(5_000);
    const firstAt = lab.clock.now().toISOString();
    await lab.compute.runDueWork();
    lab.clock.advance(5_000);
    await lab.settle();
    expect((await lab.workflow(id)).steps[1]).toMatchObject({ state: 'succeeded', result: { preloaded: true } });
    const seen = record.contexts.map((c) => c.preloaded as Record<string, unknown>);
    expect(seen).toHaveLength(2);
    for (const preloaded of seen) {
      expect(preloaded).toMatchObject({
        workflowId: id,
        nodeId: lab.nodeId,
        stepKey: `wf:${id}:main.2#0`,
        nodeKind: 'machine',
      });
    }
    // Read at the time of the read that carried it, by the engine's (fake) clock, not the database's.
    expect(new Date(seen[0]?.now as string).toISOString()).toBe(firstAt);
    expect(new Date(seen[1]?.now as string).getTime()).toBe(new Date(firstAt).getTime() + 5_000);
  });

  it("keys a preload to the step's attempt: a retry's run gets its own attempt's read", async () => {
    const lab = getLab();
    record.ready = true;
    const id = await lab.start({ id: 'lab-step-preload-retry', steps: [{ use: 'lab.preloaded' }] });
    await lab.settle();
    expect((await lab.workflow(id)).state).toBe('succeeded');
    const [first] = record.contexts;
    expect(first).toMatchObject({ attempt: 0, preloaded: { stepKey: `wf:${id}:main.1#0` } });
  });

  it('turns a failing step preload off and lets the step read for itself: the workflow still runs', async () => {
    const lab = getLab();
    record.ready = true;
    const id = await lab.start({ id: 'lab-step-preload-broken', steps: [{ use: 'lab.preloaded' }] });
    // A reconciler of its own, so turning its step preloads off does not touch the lab's.
    const reconcile = provisionModule({ steps: labSteps }).reconcilers?.workflow;
    const errors: string[] = [];
    const log = { ...lab.compute.context.log, error: (message: string) => errors.push(message) };
    const ctx: ModuleContext = { ...lab.compute.context, sql: brokenPreloadReads(lab.db), log };
    await reconcile?.(lab.nodeId, ctx);
    expect((await lab.workflow(id)).state).toBe('succeeded');
    expect(record.contexts[0]).toMatchObject({ preloaded: undefined });
    expect(errors).toEqual(["a step's preload failed; steps read for themselves from now on"]);
  });
}
