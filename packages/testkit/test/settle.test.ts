import { type Command, type ComputeModule, manifest } from '@better-compute/core';
import { addMs } from '@better-compute/core/kernel';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createFakeAgent, createFakeClock, insertNode, settle } from '../src';
import { rejection, type SharedDatabase, sharedDatabase } from './support/harness';

let shared: SharedDatabase;
beforeAll(async () => {
  shared = await sharedDatabase();
});
afterAll(() => shared.close());
beforeEach(() => shared.reset());

/** A module with one reconciler, `test.<name>`, and the `test.ping` command kind. */
function moduleWith(name: string, reconciler: NonNullable<ComputeModule['reconcilers']>[string]): ComputeModule {
  return {
    id: 'settle-test',
    commandKinds: [{ name: 'test.ping', payload: manifest({}) }],
    reconcilers: { [`test.${name}`]: reconciler },
  };
}

describe('settle', () => {
  it('returns after the kernel’s startup work when nothing else is queued, leaving the idle sweep queued', async () => {
    const clock = createFakeClock();
    const compute = await shared.compute(clock);
    const report = await settle(compute, { clock });
    expect(report.advancedMs).toBe(0);
    const { rows } = await compute.database.query('SELECT kind FROM work_items');
    expect(rows).toEqual([{ kind: 'core.expireCommands' }]);
  });

  it('moves the clock to a reconciler’s requeue and stops once it is done', async () => {
    const clock = createFakeClock();
    const runs: string[] = [];
    const compute = await shared.compute(clock, [
      moduleWith('tick', async (_key, ctx) => {
        runs.push(ctx.clock.now().toISOString());
        return runs.length < 3 ? { requeueAfterMs: 60_000 } : undefined;
      }),
    ]);
    await compute.database.transaction((tx) => compute.context.work.enqueue(tx, { kind: 'test.tick', key: 'a' }));
    const report = await settle(compute, { clock });
    expect(runs).toEqual(['2026-03-01T00:00:00.000Z', '2026-03-01T00:01:00.000Z', '2026-03-01T00:02:00.000Z']);
    expect(report.advancedMs).toBe(120_000);
    expect(clock.now().toISOString()).toBe('2026-03-01T00:02:00.000Z');
  });

  it('runs idle kinds when they fall due on the way, but does not wait for them', async () => {
    const clock = createFakeClock();
    let runs = 0;
    const compute = await shared.compute(clock, [
      moduleWith('slow', async () => {
        runs += 1;
        return runs < 2 ? { requeueAfterMs: 90_000 } : undefined;
      }),
    ]);
    await compute.database.transaction((tx) => compute.context.work.enqueue(tx, { kind: 'test.slow', key: 'a' }));
    await settle(compute, { clock });
    // The sweep ran at 0 and again when the clock jumped to 90 s; its next run, at 120 s, is not waited for.
    const { rows } = await compute.database.query<{ not_before: Date }>(
      "SELECT not_before FROM work_items WHERE kind = 'core.expireCommands'",
    );
    expect(rows[0]?.not_before.toISOString()).toBe('2026-03-01T00:02:00.000Z');
    expect(clock.now().toISOString()).toBe('2026-03-01T00:01:30.000Z');
  });

  it('treats the kinds it is told as idle', async () => {
    const clock = createFakeClock();
    const compute = await shared.compute(clock, [moduleWith('forever', async () => ({ requeueAfterMs: 600_000 }))]);
    await compute.database.transaction((tx) => compute.context.work.enqueue(tx, { kind: 'test.forever', key: 'a' }));
    const report = await settle(compute, { clock, idleKinds: ['core.expireCommands', 'test.forever'] });
    expect(report.advancedMs).toBe(0);
  });

  it('throws past maxPasses, naming the item that keeps it busy', async () => {
    const clock = createFakeClock();
    const compute = await shared.compute(clock, [moduleWith('busy', async () => ({ requeueAfterMs: 0 }))]);
    await compute.database.transaction((tx) => compute.context.work.enqueue(tx, { kind: 'test.busy', key: 'a' }));
    const err = await rejection(settle(compute, { clock, maxPasses: 20 }));
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/within 20 passes.*test\.busy\/a/);
  });

  it('throws rather than move the clock past its horizon', async () => {
    const clock = createFakeClock();
    const compute = await shared.compute(clock, [moduleWith('forever', async () => ({ requeueAfterMs: 600_000 }))]);
    await compute.database.transaction((tx) => compute.context.work.enqueue(tx, { kind: 'test.forever', key: 'a' }));
    const err = await rejection(settle(compute, { clock, horizonMs: 3_600_000 }));
    expect((err as Error).message).toMatch(/horizon of 3600000 ms.*test\.forever\/a/);
    expect(clock.now().getTime()).toBeLessThanOrEqual(new Date('2026-03-01T01:00:00Z').getTime());
  });

  it('drives a reconciler and an agent to the end: command sent, answered, wake handled', async () => {
    const clock = createFakeClock();
    const seen: string[] = [];
    const compute = await shared.compute(clock, [
      moduleWith('flow', async (key, ctx) => {
        const existing = await ctx.commands.findByKey(ctx.sql, key, 'flow:ping');
        if (!existing) {
          await ctx.sql.transaction((tx) =>
            ctx.commands.enqueue(tx, {
              nodeId: key,
              kind: 'test.ping',
              payload: {},
              key: 'flow:ping',
              notAfter: addMs(ctx.clock.now(), 300_000),
              wake: { kind: 'test.flow', key },
            }),
          );
          return undefined;
        }
        seen.push((existing as Command).state);
        return undefined;
      }),
    ]);
    const nodeId = await insertNode(compute.database, {}, clock);
    const agent = createFakeAgent(compute, { nodeId, role: 'node' });
    await agent.connect();
    await compute.database.transaction((tx) => compute.context.work.enqueue(tx, { kind: 'test.flow', key: nodeId }));
    await settle(compute, { clock, agents: [agent] });
    expect(seen).toEqual(['succeeded']);
    expect(agent.answered.map((a) => a.key)).toEqual(['flow:ping']);
  });
});
