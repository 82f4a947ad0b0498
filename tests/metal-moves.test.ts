import type { MetalSim, SimSite } from 'better-compute/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createSim } from './extensions/metal-sim';
import { BACKENDS, type ScratchDatabase } from './support/databases';
import { type StatementTap, tappedDatabase } from './support/statement-tap';

// The `metal` reconciler moves a machine at its workflow's end by one statement after the worker's claim, which reads
// the machine for it (its preload): the next phase's workflow staged, the move and both events, written only while the
// machine's row is still as the claim read it. Anything else (a machine changed since, a batch to settle) goes through
// the locked transaction as before, and decides on the machine as it is.

// Every statement the simulation's engine sends (in its transactions too), and a write hooked between two of them.
const tap: StatementTap = { recorded: undefined, after: undefined };

describe.each(BACKENDS)('the metal reconciler on $name', ({ create }) => {
  let scratch: ScratchDatabase;
  let sim: MetalSim;
  let site: SimSite;

  beforeAll(async () => {
    scratch = await create();
    sim = await createSim({ database: tappedDatabase(scratch.db, tap, { inTransactions: true }) });
    site = await sim.addSite();
  });
  afterAll(async () => {
    await sim.close();
    await scratch.drop();
  });
  afterEach(() => {
    tap.recorded = undefined;
    tap.after = undefined;
  });

  const LOCKED_READ = /SELECT 1 FROM metal_machines m WHERE m\.node_id = \$1 FOR UPDATE/;
  const START_AND_MOVE = (text: string) =>
    /INSERT INTO workflows/.test(text) && /UPDATE metal_machines SET phase/.test(text);

  it("moves a machine at each workflow's end by one statement after the claim, starting the next phase's workflow in it", async () => {
    const machine = sim.addMachine(site);
    await sim.enroll(machine);
    tap.recorded = [];
    await sim.settle();
    const statements = tap.recorded ?? [];
    tap.recorded = undefined;
    expect((await sim.get(machine)).state).toBe('available');
    // Enrolling → inspecting → commissioning, each with its workflow, then available: no lock, no read of its own.
    expect(statements.filter(START_AND_MOVE)).toHaveLength(2);
    expect(statements.filter((text) => LOCKED_READ.test(text))).toEqual([]);
    const toAvailable = statements.filter(
      (text) => /UPDATE metal_machines SET phase/.test(text) && !/INSERT INTO workflows/.test(text),
    );
    expect(toAvailable).toHaveLength(1);
    // Each pass deletes its own work item with its last statement: the moves, and the plans that ended a workflow.
    const finishing = (text: string) => /finished AS \(DELETE FROM work_items/.test(text);
    expect(statements.filter(START_AND_MOVE).every(finishing)).toBe(true);
    expect(statements.filter((text) => /UPDATE workflows SET revision/.test(text) && finishing(text))).toHaveLength(3);
    // The shipped profiles are taken without reading the stored ones.
    expect(statements.filter((text) => /FROM profiles WHERE id = \$2/.test(text))).toEqual([]);
  });

  it('moves a machine changed since the claim read it in a transaction, deciding on it as it is now', async () => {
    const machine = sim.addMachine(site);
    await sim.enroll(machine);
    const nodeId = machine.nodeId as string;
    // Right after the claim of the machine's reconciler at its inspection's end, an operator's hold lands: stop after
    // inspecting. The claim's read has no hold; the move must see it.
    let inspected = false;
    tap.after = {
      pattern: /m\.xmin::text AS version/,
      when: (rows) =>
        rows.some(
          (row) =>
            row.kind === 'metal' &&
            row.key === nodeId &&
            (row.preloaded as { phase?: string } | null)?.phase === 'inspecting',
        ),
      run: async () => {
        inspected = true;
        await scratch.db.query(
          `UPDATE metal_machines SET hold_after = 'inspecting' WHERE node_id = $1 AND phase = 'inspecting'`,
          [nodeId],
        );
      },
    };
    tap.recorded = [];
    await sim.settle();
    const statements = tap.recorded ?? [];
    tap.recorded = undefined;
    expect(inspected).toBe(true);
    const view = await sim.get(machine);
    expect(view.state).toBe('inspecting');
    expect(view.workflow).toBeNull();
    // The one-statement move was stale (the row changed after the claim), and the locked read decided again.
    expect(statements.filter((text) => LOCKED_READ.test(text)).length).toBeGreaterThanOrEqual(1);
  });
});
