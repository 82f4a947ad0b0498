import { describe, expect, it } from 'vitest';
import { runWithCrash } from './support/crash-sweep';
import { BACKENDS } from './support/databases';

// workflows.md, "What the tests guarantee": a worker killed at any point resumes from the persisted workflow, and no
// command is sent twice. The worker dies at every transaction boundary in turn, before and after its commit, and the
// final state is compared whole: the workflow, its steps, its commands and its events (an event written outside its
// transition would be lost or written twice by some crash point).
describe.each(BACKENDS)('a worker crashed at every transaction boundary ($name)', ({ create }) => {
  it('finishes in the uncrashed final state, events included, with no command key sent twice', async () => {
    const scratch = await create();
    try {
      const reference = await runWithCrash(scratch.db, undefined);
      expect(reference.crashed).toBe(false);
      expect(reference.outcome.state).toBe('failed');
      // Enough boundaries to cross every kind of write the scenario makes (each send held to the end of its pass
      // and written with the requeue made the count drop from 21 to 20; it only has to stay far from trivial).
      expect(reference.boundaries).toBeGreaterThanOrEqual(15);
      const types = reference.outcome.events.map((e) => e.type);
      expect([types[0], types.at(-1)]).toEqual(['workflow.created', 'workflow.failed']);
      const keys = reference.outcome.commands.map((c) => c.key);
      expect(new Set(keys).size).toBe(keys.length);
      for (let at = 1; at <= reference.boundaries; at += 1) {
        for (const when of ['before-commit', 'after-commit'] as const) {
          const run = await runWithCrash(scratch.db, { at, when });
          expect(run.crashed, `crash at ${at} ${when}`).toBe(true);
          expect(run.outcome, `crash at ${at} ${when}`).toEqual(reference.outcome);
          expect(new Set(run.outcome.answered).size, `crash at ${at} ${when}`).toBe(run.outcome.answered.length);
        }
      }
    } finally {
      await scratch.drop();
    }
  }, 600_000);
});
