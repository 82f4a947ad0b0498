import type { FakeClock } from 'better-compute/testkit';
import { describe, expect, it } from 'vitest';
import { answerDeterministically, outcomeOf, runWithCrash, SWEEP_PROFILE } from './support/crash-sweep';
import { scratchPostgres, TEST_DATABASE_URL } from './support/databases';
import { createEngineLab } from './support/engine-lab';
import { runWorkerProcess } from './support/engine-process';

// The crash sweep with a real process: a worker on PostgreSQL is killed by SIGKILL at every one of its transaction
// boundaries in turn (before and after the commit; the workflow has control-plane, relaying and agent steps), and a
// fresh worker finishes the workflow in the uncrashed final state: workflow, steps, commands and events.
const systemTime: FakeClock = {
  now: () => new Date(),
  advance: () => {
    throw new Error('this lab runs on real time');
  },
  set: () => {
    throw new Error('this lab runs on real time');
  },
};

const ENDED = ['succeeded', 'failed', 'cancelled'];

describe.runIf(TEST_DATABASE_URL)('a worker process killed by SIGKILL (postgres)', () => {
  it('leaves a workflow a fresh worker finishes in the uncrashed final state at every boundary, with no command sent twice', async () => {
    const scratch = await scratchPostgres();
    try {
      const reference = (await runWithCrash(scratch.db, undefined)).outcome;
      const run = async (killAt: number, when: 'before-commit' | 'after-commit') => {
        const host = await createEngineLab(scratch.db, { clock: systemTime });
        await host.reset();
        answerDeterministically(host);
        const workflowId = await host.start(SWEEP_PROFILE);
        const env = {
          DATABASE_URL: scratch.url as string,
          KILL_AT: String(killAt),
          KILL_WHEN: when,
          WORKFLOW_ID: workflowId,
        };
        const exit = await runWorkerProcess(env, async () => {
          for (const agent of host.agents) await agent.poll();
        });
        const until = Date.now() + 60_000;
        while (!ENDED.includes((await host.workflow(workflowId)).state) && Date.now() < until) {
          let moved = await host.compute.runDueWork();
          for (const agent of host.agents) moved += await agent.poll();
          if (moved === 0) await new Promise((resolve) => setTimeout(resolve, 20));
        }
        const outcome = await outcomeOf(host, workflowId);
        await host.close();
        return { exit, outcome };
      };
      const whole = await run(0, 'before-commit');
      expect(whole.exit.code, whole.exit.stderr).toBe(0);
      expect(whole.outcome).toEqual(reference);
      const total = whole.exit.boundaries ?? 0;
      // The sweep profile commits a dozen times (transactions and one-statement transitions), every one killed twice.
      expect(total).toBeGreaterThan(10);
      const started = Date.now();
      for (let at = 1; at <= total; at += 1) {
        for (const when of ['before-commit', 'after-commit'] as const) {
          const killed = await run(at, when);
          expect(killed.exit.code, `kill at ${at} ${when}: ${killed.exit.stderr}`).toBe('SIGKILL');
          expect(killed.outcome, `kill at ${at} ${when}`).toEqual(reference);
          expect(new Set(killed.outcome.answered).size).toBe(killed.outcome.answered.length);
        }
      }
      // The figures, for the README and for whoever watches the suite's time (never asserted).
      console.info(`SIGKILL sweep: ${total} boundaries, ${2 * total} kills, ${Date.now() - started} ms`);
    } finally {
      await scratch.drop();
    }
  }, 600_000);
});
