import type { MetalSim, SimSite } from 'better-compute/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createSim } from './extensions/metal-sim';
import { BACKENDS, type ScratchDatabase } from './support/databases';
import { type StatementTap, tappedDatabase } from './support/statement-tap';

// A machine moves at its workflow's end in the statement that ends the workflow (metal's end write): the engine's claim
// read the machine with the workflow (metal's preload), and the statement writes the end, the move, the next phase's
// workflow and the events, only while the machine's row is still as the claim read it. When it is not, the workflow
// ends without the move and the `metal` reconciler is queued, as before: by one statement after its own claim when it
// can, else through the locked transaction, which decides on the machine as it is.

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

  const ENDS_WORKFLOW = (text: string) => /UPDATE workflows SET revision/.test(text);
  const FINISHING = (text: string) => /finished AS \(DELETE FROM work_items/.test(text);
  const REQUEUEING = (text: string) => /requeued AS \(UPDATE work_items/.test(text);

  // The claim of the machine's workflow during its phase `phase` whose last step is in flight (the claim of the pass
  // that ends it), or of the `metal` reconciler's item with the machine in that phase.
  const claimOf = (nodeId: string, phase: string) => (rows: readonly Record<string, unknown>[]) =>
    rows.some((row) => {
      if (row.key !== nodeId) return false;
      const preloaded = row.preloaded as Record<string, unknown> | null;
      if (row.kind === 'metal') return (preloaded as { phase?: string } | null)?.phase === phase;
      if (row.kind !== 'workflow' || !preloaded) return false;
      const reads = (preloaded.step_reads as { reads?: Record<string, { lifecycle?: { phase?: string } }> } | null)
        ?.reads;
      const steps = preloaded.steps as { state: string }[];
      return (
        reads?.['metal.machine']?.lifecycle?.phase === phase &&
        !steps.some((step) => step.state === 'pending') &&
        steps.some((step) => step.state === 'running' || step.state === 'waiting')
      );
    });

  // Runs `run` right after the claim of the pass that ends the machine's inspection.
  const afterEndingClaim = (nodeId: string, run: () => Promise<void>): StatementTap['after'] => ({
    pattern: /'lifecycle', json_build_object/,
    when: claimOf(nodeId, 'inspecting'),
    run,
  });

  // An operator's hold landing between two statements of the engine: stop after inspecting.
  const holdAfterInspecting = (nodeId: string) =>
    scratch.db.query(
      `UPDATE metal_machines SET hold_after = 'inspecting' WHERE node_id = $1 AND phase = 'inspecting'`,
      [nodeId],
    );

  it("moves a machine in the statement that ends each workflow, starting the next phase's workflow in it", async () => {
    const machine = sim.addMachine(site);
    await sim.enroll(machine);
    tap.recorded = [];
    await sim.settle();
    const statements = tap.recorded ?? [];
    tap.recorded = undefined;
    expect((await sim.get(machine)).state).toBe('available');
    // Enrolling → inspecting → commissioning, each with its workflow, then available: each move is written by the
    // statement that ends the workflow before it, with no lock and no read of its own.
    const startsAndMoves = statements.filter(START_AND_MOVE);
    expect(startsAndMoves).toHaveLength(2);
    expect(startsAndMoves.every(ENDS_WORKFLOW)).toBe(true);
    // The next phase's workflow goes on in the same pass: its ramdisk's first commands (boot device, boot entries,
    // power cycle) are sent by that statement too, with no claim or statement of its own before them.
    expect(startsAndMoves.every((text) => /INSERT INTO commands/.test(text))).toBe(true);
    expect(statements.filter((text) => LOCKED_READ.test(text))).toEqual([]);
    const toAvailable = statements.filter(
      (text) => /UPDATE metal_machines SET phase/.test(text) && !/INSERT INTO workflows/.test(text),
    );
    expect(toAvailable).toHaveLength(1);
    expect(toAvailable.every(ENDS_WORKFLOW)).toBe(true);
    // The next workflow has the node's key, the pass's own item: the statement requeues it for its first pass; the
    // last end deletes it.
    expect(startsAndMoves.every((text) => REQUEUEING(text) && !FINISHING(text))).toBe(true);
    expect(toAvailable.every(FINISHING)).toBe(true);
    // No `metal` item was queued: nothing but the engine's statements moved the machine.
    expect(statements.filter((text) => /INSERT INTO work_items/.test(text) && /'metal'/.test(text))).toEqual([]);
    // The commissioning's driver operations go to the site agent with the machine's BMC as the claims read it: the
    // BIOS read's, planned right after the claim of the firmware read's result; the firmware read's, planned after
    // `inspect.collect`'s run, whose inventory (labels it says it leaves) the statement that starts the read writes.
    const bmcReads = statements.filter((text) => /SELECT bmc_address, bmc_driver, bmc_credential_ref/.test(text));
    expect(bmcReads).toEqual([]);
    const inventories = statements.filter((text) => /inventory_node AS/.test(text));
    // The inspection's, the commissioning's and its acceptance's: each starts the next step and sends its command (the
    // firmware read, a driver operation; the cleanup's power off, a relaying step run on the machine as the claim read
    // it and as the inventory leaves it) in the statement that writes it, with no read of the workflow or the machine.
    expect(inventories).toHaveLength(3);
    expect(inventories.every((text) => /INSERT INTO commands/.test(text))).toBe(true);
    expect(statements.filter((text) => /FROM \(SELECT \* FROM workflows WHERE key = \$1/.test(text))).toEqual([]);
    // The shipped profiles are taken without reading the stored ones.
    expect(statements.filter((text) => /FROM profiles WHERE id = \$2/.test(text))).toEqual([]);
  });

  it('ends a workflow without the move when the machine changed since the claim, and the reconciler decides on it as it is now', async () => {
    const machine = sim.addMachine(site);
    await sim.enroll(machine);
    const nodeId = machine.nodeId as string;
    // Right after the claim of the pass that ends the inspection, an operator's hold lands: stop after inspecting. The
    // claim's read has no hold; the move must see it.
    let inspected = false;
    tap.after = afterEndingClaim(nodeId, async () => {
      inspected = true;
      await holdAfterInspecting(nodeId);
    });
    tap.recorded = [];
    await sim.settle();
    tap.recorded = undefined;
    expect(inspected).toBe(true);
    const view = await sim.get(machine);
    expect(view.state).toBe('inspecting');
    expect(view.workflow).toBeNull();
    expect(view.held).toBe(true);
  });

  it("moves a machine changed since its reconciler's claim read it in a transaction, deciding on it as it is now", async () => {
    const machine = sim.addMachine(site);
    await sim.enroll(machine);
    const nodeId = machine.nodeId as string;
    // The end write is stale (a write right after the ending pass's claim), so the workflow ends without it and the
    // `metal` reconciler is queued; right after that reconciler's claim, the operator's hold lands.
    let inspected = false;
    tap.after = afterEndingClaim(nodeId, async () => {
      await scratch.db.query('UPDATE metal_machines SET updated_at = updated_at WHERE node_id = $1', [nodeId]);
      tap.after = {
        pattern: /m\.xmin::text AS version/,
        when: (rows) => rows.some((row) => row.kind === 'metal' && row.key === nodeId),
        run: async () => {
          inspected = true;
          await holdAfterInspecting(nodeId);
        },
      };
    });
    tap.recorded = [];
    await sim.settle();
    const statements = tap.recorded ?? [];
    tap.recorded = undefined;
    expect(inspected).toBe(true);
    const view = await sim.get(machine);
    expect(view.state).toBe('inspecting');
    expect(view.workflow).toBeNull();
    // The reconciler's one-statement move was stale too, and the locked read decided again.
    expect(statements.filter((text) => LOCKED_READ.test(text)).length).toBeGreaterThanOrEqual(1);
  });
});
