import { abortWorkflow } from 'better-compute/provision';
import { describe, expect, it } from 'vitest';
import { scratchPostgres, TEST_DATABASE_URL } from './support/databases';
import { createEngineLab } from './support/engine-lab';

// workflows.md: the API verbs lock the workflow row the reconciler locks for every transition, so they serialize with
// it. PostgreSQL only: it takes a second connection holding the row while the verb runs.
describe.runIf(TEST_DATABASE_URL)('the verbs and the reconciler (postgres)', () => {
  it('makes a verb wait for a transition holding the workflow row, and act on what it committed', async () => {
    const scratch = await scratchPostgres();
    const lab = await createEngineLab(scratch.db);
    try {
      await lab.reset();
      const id = await lab.start({ id: 'lab-lock', steps: [{ use: 'lab.noop' }, { use: 'lab.noop' }] });
      const other = scratch.connect();
      let release!: () => void;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      const order: string[] = [];
      // A transition in flight: the row is locked, and the workflow is moved to running before the lock is let go.
      const transition = other.transaction(async (tx) => {
        await tx.query('SELECT id FROM workflows WHERE id = $1 FOR UPDATE', [id]);
        await held;
        await tx.query("UPDATE workflows SET state = 'running' WHERE id = $1", [id]);
        order.push('transition committed');
      });
      await new Promise((resolve) => setTimeout(resolve, 50));
      const verb = abortWorkflow(lab.compute.context, { workflowId: id, reason: 'operator' }).then((wf) => {
        order.push('abort returned');
        return wf;
      });
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(order).toEqual([]);
      release();
      await transition;
      const aborted = await verb;
      expect(order).toEqual(['transition committed', 'abort returned']);
      // It saw the committed `running` state, so it cancels through the cleanup phase instead of at once.
      expect(aborted.state).toBe('cancelling');
    } finally {
      await lab.close();
      await scratch.drop();
    }
  });
});
