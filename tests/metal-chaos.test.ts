import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { SqlDatabase } from 'better-compute/core';
import { type CrashPlan, createFakeClock, type FakeClock, type MetalSim, WorkerCrashed } from 'better-compute/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSim, destructiveRunTwice, USER_DATA } from './extensions/metal-sim';
import { type ScratchDatabase, scratchPglite, scratchPostgres, TEST_DATABASE_URL } from './support/databases';
import { runWorkerProcess, type WorkerExit } from './support/engine-process';

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

// The same run on PostgreSQL with a real process: the reconcilers' worker is tests/fixtures/metal-worker.ts, the
// compute createMetalSim builds (metalSimWorker, with the simulation's pki key) on the same database, and it kills
// itself with SIGKILL at its KILL_AT-th transaction boundary, before or after the commit. The simulated agents and the
// fake clock stay in this process: the worker runs one pass of due work each time the simulation's settle asks for
// one, on the simulation's time, so its boundaries fall at the same points in every run. After the kill the
// simulation's own compute (a fresh worker) settles the rest. A sample of KILLS boundaries spread over the run (each
// before and after its commit) keeps the test under a minute; the PGlite sweep above covers many more.
const KILLS = Number(process.env.METAL_CHAOS_KILLS ?? 3);
const WORKER = new URL('./fixtures/metal-worker.ts', import.meta.url);

type WorkerReply = { ready: true } | { moved: number; boundaries: number } | { error: string };

/**
 * The worker process as `sim.settle({ worker })` drives it: `runDueWork` sends the simulation's time and waits for
 * the pass's count; once the process is gone it throws `WorkerCrashed`, and the simulation's compute takes over.
 */
function processWorker(child: ChildProcess, sim: MetalSim) {
  let gone = child.exitCode !== null || child.signalCode !== null;
  child.once('exit', () => {
    gone = true;
  });
  /** Sends `message` (none: waits for what the process says by itself) and waits for its answer. */
  const reply = (message?: object) =>
    new Promise<WorkerReply | undefined>((resolve) => {
      if (gone) return resolve(undefined);
      const onMessage = (m: WorkerReply) => {
        child.off('exit', onExit);
        resolve(m);
      };
      const onExit = () => {
        child.off('message', onMessage);
        resolve(undefined);
      };
      child.once('message', onMessage);
      child.once('exit', onExit);
      if (message) child.send(message, () => {});
    });
  const worker = {
    get dead() {
      return gone;
    },
    async ready() {
      const first = await reply();
      if (!first || !('ready' in first)) throw new Error('the worker process did not start (see its stderr)');
    },
    compute: {
      database: sim.database,
      async runDueWork() {
        const answer = await reply({ now: sim.clock.now().getTime() });
        if (!answer) throw new WorkerCrashed(0, 'the worker process is gone');
        if ('error' in answer) throw new Error(`the worker process failed: ${answer.error}`);
        if (!('moved' in answer)) throw new Error('the worker process answered out of turn');
        return answer.moved;
      },
    },
    /** Tells a living worker to print its boundaries and exit; waits until the process is gone. */
    async finish() {
      if (gone) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.send({ done: true }, () => {});
      await exited;
    },
  };
  return worker;
}

/** One machine enrolled, deployed and released on PostgreSQL, the reconcilers run by the worker process. */
async function runWithProcess(scratch: ScratchDatabase, killAt: number, when: CrashPlan['when']) {
  await reset(scratch.db);
  const key = randomBytes(32).toString('hex');
  const clock: FakeClock = createFakeClock();
  const sim = await createSim({ database: scratch.db, clock, key });
  try {
    const site = await sim.addSite();
    const image = await sim.addImage({ name: 'ubuntu/noble', version: '24.04.1' });
    const machine = sim.addMachine(site);
    let nodeId: string | undefined;
    let started = false;
    const env = {
      DATABASE_URL: scratch.url as string,
      SIM_KEY: key,
      SIM_NOW: String(clock.now().getTime()),
      SIM_USER_DATA: JSON.stringify(USER_DATA),
      KILL_AT: String(killAt),
      KILL_WHEN: when,
    };
    const exit: WorkerExit = await runWorkerProcess(
      env,
      async (child) => {
        if (started) return;
        started = true;
        const worker = processWorker(child, sim);
        try {
          await worker.ready();
          const settle = () => sim.settle(worker.dead ? {} : { worker });
          nodeId = (await sim.enroll(machine)).nodeId;
          await settle();
          await sim.api.metal.deploy(sim.token, { tenantId: 'root', nodeId, profileId: 'metal.deploy-image', image });
          await settle();
          await sim.api.metal.release(sim.token, { tenantId: 'root', nodeId });
          await settle();
          await worker.finish();
        } catch (error) {
          child.kill('SIGKILL');
          throw error;
        }
      },
      { script: WORKER, ipc: true },
    );
    if (!nodeId) throw new Error(`the run never enrolled its machine: ${exit.stderr}`);
    return { exit, outcome: await outcomeOf(sim, nodeId) };
  } finally {
    await sim.close();
  }
}

describe.runIf(TEST_DATABASE_URL)('metal chaos: a worker process killed by SIGKILL (postgres)', () => {
  let scratch: ScratchDatabase;
  beforeAll(async () => {
    scratch = await scratchPostgres();
  });
  afterAll(() => scratch?.drop());

  it('ends in the uncrashed final state at a sample of boundaries, with no destructive command key run twice', async () => {
    const started = Date.now();
    // The uncrashed run in this process (sim.worker, as on PGlite), then in the worker process: the same outcome.
    const reference = await runWithCrash(scratch.db, undefined);
    expect(reference.outcome.state).toBe('available');
    expect(reference.outcome.destructiveTwice).toEqual([]);
    const whole = await runWithProcess(scratch, 0, 'before-commit');
    expect(whole.exit.code, whole.exit.stderr).toBe(0);
    expect(whole.outcome).toEqual(reference.outcome);
    const total = whole.exit.boundaries ?? 0;
    expect(total).toBeGreaterThan(50);
    const points = Array.from({ length: KILLS }, (_, i) => Math.max(1, Math.round(((i + 1) * total) / (KILLS + 1))));
    for (const at of points) {
      for (const when of ['before-commit', 'after-commit'] as const) {
        const killed = await runWithProcess(scratch, at, when);
        expect(killed.exit.code, `kill at ${at} ${when}: ${killed.exit.stderr}`).toBe('SIGKILL');
        expect(killed.outcome, `kill at ${at} ${when}`).toEqual(reference.outcome);
      }
    }
    // The figures, for whoever watches the suite's time (never asserted).
    console.info(
      `metal SIGKILL sample: ${total} boundaries, ${points.length * 2} kills at ${points.join(', ')}, ` +
        `${Date.now() - started} ms`,
    );
  }, 300_000);
});
