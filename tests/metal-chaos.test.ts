import type { SqlDatabase } from 'better-compute/core';
import { type CrashPlan, createFakeClock, type MetalSim } from 'better-compute/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSim, destructiveRunTwice } from './extensions/metal-sim';
import { type ScratchDatabase, scratchPglite } from './support/databases';

// workflows.md, "What the tests guarantee": a worker killed at any point of a deploy resumes from the persisted
// workflow, and no destructive command is sent twice. One machine goes the whole way through metal's shipped profiles
// (enroll → inspect → commission → available → deploy → deployed → release → available) with the worker that runs
// the reconcilers dying at a transaction boundary, before or after its commit; a fresh worker (the simulation's own
// compute) takes over. The final state must equal the uncrashed run's: the node, every workflow and step, every
// command, every event, and what the simulated agents ran, with no destructive command key run twice.
//
// Sampled on PGlite: a full run crosses several hundred boundaries and costs about a second, so every boundary twice
// would take many minutes. The sweep takes SAMPLES boundaries spread evenly over the run (from the first to the last,
// each before and after its commit), which covers every phase and kind of step; raise SAMPLES locally for a full sweep.
const SAMPLES = Number(process.env.METAL_CHAOS_SAMPLES ?? 16);

async function reset(db: SqlDatabase): Promise<void> {
  const { rows } = await db.query<{ tablename: string }>(
    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'schema_migrations'",
  );
  if (rows.length > 0) await db.query(`TRUNCATE ${rows.map((r) => `"${r.tablename}"`).join(', ')} CASCADE`);
}

/** Everything of a run that must not depend on where a worker died, with ids replaced by their order. */
async function outcomeOf(sim: MetalSim, nodeId: string) {
  const db = sim.database;
  const { rows: workflows } = await db.query<{ id: string; profile_id: string; state: string; error: unknown }>(
    'SELECT id, profile_id, state, error FROM workflows ORDER BY created_at, profile_id',
  );
  const anonymous = (text: string) =>
    workflows.reduce((t, w, i) => t.replaceAll(w.id, `WF${i}`), text).replaceAll(nodeId, 'NODE');
  const { rows: steps } = await db.query<{
    workflow_id: string;
    step_id: string;
    action: string;
    state: string;
    attempt: number;
  }>('SELECT workflow_id, step_id, action, state, attempt FROM workflow_steps ORDER BY workflow_id, position');
  const { rows: commands } = await db.query<{ kind: string; key: string; state: string }>(
    'SELECT kind, key, state FROM commands',
  );
  const { rows: events } = await db.query<{ type: string; subject: string }>(
    'SELECT type, subject FROM events ORDER BY seq',
  );
  const view = await sim.get(nodeId);
  return {
    state: view.state,
    lastError: view.lastError,
    labels: view.labels,
    workflows: workflows.map((w) => `${w.profile_id} ${w.state}`),
    steps: steps.map((s) => anonymous(`${s.workflow_id} ${s.step_id} ${s.action} ${s.state} ${s.attempt}`)),
    commands: commands.map((c) => anonymous(`${c.kind} ${c.key} ${c.state}`)).sort(),
    events: events.map((e) => (e.subject.startsWith('site/') ? e.type : anonymous(`${e.type} ${e.subject}`))),
    ran: sim.commands.map((c) => anonymous(`${c.role} ${c.operation ?? c.kind} ${c.key} ${c.outcome}`)).sort(),
    destructiveTwice: destructiveRunTwice(sim),
  };
}

/**
 * One machine enrolled, deployed and released, the reconcilers run by a worker that dies at `plan` (none: it lives);
 * after it died the simulation's own compute settles the rest. Returns the outcome and the worker's boundaries.
 */
async function runWithCrash(db: SqlDatabase, plan: CrashPlan | undefined) {
  await reset(db);
  const sim = await createSim({ database: db, clock: createFakeClock() });
  try {
    const site = await sim.addSite();
    const image = await sim.addImage({ name: 'ubuntu/noble', version: '24.04.1' });
    const machine = sim.addMachine(site);
    const worker = await sim.worker(plan);
    const settle = () => sim.settle(worker.database.crashed ? {} : { worker });
    const { nodeId } = await sim.enroll(machine);
    await settle();
    await sim.api.metal.deploy(sim.token, { tenantId: 'root', nodeId, profileId: 'metal.deploy-image', image });
    await settle();
    await sim.api.metal.release(sim.token, { tenantId: 'root', nodeId });
    await settle();
    const boundaries = worker.boundaries;
    await worker.close();
    return { outcome: await outcomeOf(sim, nodeId), crashed: worker.database.crashed, boundaries };
  } finally {
    await sim.close();
  }
}

describe('metal chaos: a worker killed at transaction boundaries of enroll → deploy → release (pglite)', () => {
  let scratch: ScratchDatabase;
  beforeAll(async () => {
    scratch = await scratchPglite();
  });
  afterAll(() => scratch.drop());

  it('ends in the uncrashed final state, with no destructive command key run twice', async () => {
    const reference = await runWithCrash(scratch.db, undefined);
    expect(reference.crashed).toBe(false);
    expect(reference.outcome.state).toBe('available');
    expect(reference.outcome.workflows).toEqual([
      'metal.enroll succeeded',
      'metal.inspect succeeded',
      'metal.commission succeeded',
      'metal.deploy-image succeeded',
      'metal.release succeeded',
    ]);
    expect(reference.outcome.destructiveTwice).toEqual([]);
    expect(reference.boundaries).toBeGreaterThan(50);
    const step = reference.boundaries / SAMPLES;
    const points = [...new Set(Array.from({ length: SAMPLES }, (_, i) => Math.max(1, Math.round((i + 1) * step))))];
    for (const at of points) {
      for (const when of ['before-commit', 'after-commit'] as const) {
        const run = await runWithCrash(scratch.db, { at, when });
        expect(run.crashed, `crash at ${at} ${when}`).toBe(true);
        expect(run.outcome, `crash at ${at} ${when}`).toEqual(reference.outcome);
      }
    }
    console.info(
      `metal chaos: ${reference.boundaries} boundaries, ${points.length * 2} crashes at ${points.join(', ')}`,
    );
  }, 600_000);
});
