// bench/engine: the workflow engine with real workers and the system clock, on the local PostgreSQL (a scratch
// database per scenario) and on PGlite, beside pgbench's single-row-insert TPS measured in the same run:
// - control-plane: `workflows` concurrent workflows of ten no-op control-plane steps: steps/s, transitions/s and
//   database round trips per step;
// - agent: `workflows` concurrent workflows of five agent steps answered by in-process agents as fast as they can:
//   steps/s (the engine's capacity with agents on the same machine) and the latency from a command's result to the
//   next step's command (p50, p99) on a saturated machine;
// - fleet: the same workflows, each command answered after a think time (0.5–1.5 × BENCH_FLEET_THINK_MS, as a machine
//   running it would take): the same latency at a load below saturation;
// - probe: the same agent workflows one at a time (an idle engine), for the same latency without queueing.
// Usage: pnpm --filter @better-compute/bench engine [workflows]   (default 1000; see bench/README.md for the knobs)

import { readFileSync } from 'node:fs';
import { betterCompute, type Compute, manifest, type SqlDatabase, type SqlExecutor } from '@better-compute/core';
import { systemClock } from '@better-compute/core/kernel';
import { createPgliteDatabase } from '@better-compute/core/pglite';
import { createPostgresDatabase } from '@better-compute/core/postgres';
import { defineStep, type ProfileDefinition, provisionModule, storeProfile } from '@better-compute/provision';
import { insertNode, insertSite } from '@better-compute/testkit';
import {
  type CountingDatabase,
  commits,
  countingDatabase,
  type QueryCounts,
  roundTrips,
  since,
  snapshot,
} from '../support/counting-database';
import { pgbenchInsertTps } from '../support/pgbench';
import { createBenchDatabase } from '../support/scratch-database';
import { fmt, percentile } from '../support/stats';
import { AgentsProcess } from './agents-process';
import { benchModule } from './bench-module';
import { BulkAgents, createBulkPollIndex } from './bulk-agents';

const baseUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const workflows = Number(process.argv[2] ?? 1000);
/** Items each worker runs at once (betterCompute's `workers.concurrency`). */
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 16);
const timeoutMs = Number(process.env.BENCH_TIMEOUT_S ?? 600) * 1000;
const backends = (process.env.BENCH_BACKENDS ?? 'postgres,pglite').split(',') as Backend[];
const workerCounts = (process.env.BENCH_WORKERS ?? '1,2').split(',').map(Number);
const workloads = (process.env.BENCH_WORKLOADS ?? 'control-plane,agent,fleet,probe').split(',') as Workload[];
const PROBES = Number(process.env.BENCH_PROBES ?? 100);
const NOOP_STEPS = 10;
/** Agent steps per workflow (`BENCH_AGENT_STEPS`, default 5): fewer shows what a workflow's start and end cost a step. */
const AGENT_STEPS = Number(process.env.BENCH_AGENT_STEPS ?? 5);
/** The in-process agents' runners: how many commands are answered at once (the offered load). */
const AGENT_CONCURRENCY = Number(process.env.BENCH_AGENT_CONCURRENCY ?? 8);
/**
 * Where the agents run on PostgreSQL: `process` (a child of their own, the default: remote agents do not share the
 * engine's Node.js thread) or `inline` (this process). On PGlite they are always inline.
 */
const AGENTS_WHERE = process.env.BENCH_AGENTS ?? 'process';
/**
 * The agents' process's niceness, 0 (the default) to 19. Agents run on machines of their own; 19 makes their client
 * work yield this machine's cores to the engine and the server (their statements still run at normal priority).
 */
const AGENTS_NICE = Number(process.env.BENCH_AGENTS_NICE ?? 0);
if (!Number.isInteger(AGENTS_NICE) || AGENTS_NICE < 0 || AGENTS_NICE > 19) {
  throw new Error('BENCH_AGENTS_NICE must be an integer from 0 to 19');
}
const PGBENCH_SECONDS = 5;
/** The fleet workload's mean think time: how long a machine takes to answer a command (0.5–1.5 × this). */
const FLEET_THINK_MS = Number(process.env.BENCH_FLEET_THINK_MS ?? 5_000);

if (!['127.0.0.1', 'localhost', '[::1]'].includes(new URL(baseUrl).hostname)) {
  throw new Error(`bench/engine runs against a local server only, not ${new URL(baseUrl).host}`);
}

type Backend = 'postgres' | 'pglite';
type Workload = 'control-plane' | 'agent' | 'fleet' | 'probe';

const noop = defineStep({
  id: 'bench.noop',
  runsOn: 'control-plane',
  timeout: '30m',
  retrySafe: true,
  input: manifest({}),
  async run() {
    return null;
  },
});

const ping = defineStep({
  id: 'bench.ping',
  runsOn: 'node',
  command: 'bench.ping',
  timeout: '30m',
  retrySafe: true,
  input: manifest({}),
});

const PROFILES: Record<'noop' | 'agent', ProfileDefinition> = {
  noop: {
    id: 'bench-noop',
    version: 1,
    target: 'metal',
    steps: Array.from({ length: NOOP_STEPS }, () => ({ use: 'bench.noop' })),
  },
  agent: {
    id: 'bench-agent',
    version: 1,
    target: 'metal',
    steps: Array.from({ length: AGENT_STEPS }, () => ({ use: 'bench.ping' })),
  },
};

/** One compute on a fresh database, its nodes, and an uncounted handle for setup, agents and polling. */
interface Lab {
  backend: Backend;
  workers: number;
  counting: CountingDatabase;
  /** Not counted: setup, the agents, the bench's own polling. On PGlite, the same single connection. */
  aux: SqlDatabase;
  compute: Compute;
  nodes: string[];
  /** The scratch database's URL on PostgreSQL (for the agents' own process); undefined on PGlite. */
  url: string | undefined;
  close(): Promise<void>;
}

async function openLab(backend: Backend, workers: number, nodeCount: number): Promise<Lab> {
  let raw: SqlDatabase;
  let aux: SqlDatabase;
  let url: string | undefined;
  let release: () => Promise<void>;
  if (backend === 'postgres') {
    const scratch = await createBenchDatabase(baseUrl);
    url = scratch.url;
    // Every reconciler in flight holds at most one connection; a few more for claims, completions and heartbeats.
    raw = createPostgresDatabase({ url: scratch.url, max: workers * concurrency + 4 });
    aux = createPostgresDatabase({ url: scratch.url, max: AGENT_CONCURRENCY + 2 });
    release = async () => {
      await aux.close();
      await raw.close();
      await scratch.drop();
    };
  } else {
    raw = await createPgliteDatabase();
    aux = raw;
    release = () => raw.close();
  }
  try {
    const counting = countingDatabase(raw);
    const compute = await betterCompute({
      database: counting,
      modules: [benchModule, provisionModule({ steps: [noop, ping] })],
      workers: { concurrency },
    });
    await createBulkPollIndex(aux);
    const siteId = await insertSite(aux, {}, systemClock);
    const nodes: string[] = [];
    for (let i = 0; i < nodeCount; i += 250) {
      await aux.transaction(async (tx) => {
        for (let j = i; j < Math.min(nodeCount, i + 250); j += 1) {
          nodes.push(await insertNode(tx, { siteId, name: `bench-${j}` }, systemClock));
        }
      });
    }
    await aux.transaction(async (tx) => {
      for (const profile of Object.values(PROFILES)) await storeProfile(tx, { tenantId: 'root', profile }, new Date());
    });
    return {
      backend,
      workers,
      counting,
      aux,
      compute,
      nodes,
      url,
      async close() {
        await compute.close();
        await release();
      },
    };
  } catch (err) {
    await release();
    throw err;
  }
}

async function startWorkflows(lab: Lab, profileId: string, nodes: readonly string[]): Promise<void> {
  const start = lab.compute.context.workflows;
  if (!start) throw new Error('ctx.workflows is missing: is the provision module installed?');
  for (let i = 0; i < nodes.length; i += 50) {
    await lab.aux.transaction(async (tx) => {
      for (const nodeId of nodes.slice(i, i + 50)) {
        await start.start(tx, { tenantId: 'root', profileId, profileVersion: 1, nodeId });
      }
    });
  }
}

interface Settled {
  succeeded: number;
  failed: number;
  timedOut: boolean;
}

/** Waits until `count` workflows ended (polling every `pollMs`), or until `deadline` (epoch ms). */
async function waitForWorkflows(
  sql: SqlExecutor,
  count: number,
  deadline: number,
  what: string,
  pollMs = 50,
): Promise<Settled> {
  for (;;) {
    const { rows } = await sql.query<{ state: string; n: number }>(
      'SELECT state, count(*)::int AS n FROM workflows GROUP BY state',
    );
    const of = (state: string) => rows.find((r) => r.state === state)?.n ?? 0;
    const settled = { succeeded: of('succeeded'), failed: of('failed') + of('cancelled'), timedOut: false };
    if (settled.succeeded + settled.failed >= count) return settled;
    if (Date.now() >= deadline) {
      console.error(
        `${what}: TIMED OUT after ${fmt(timeoutMs / 1000, 0)} s with ${settled.succeeded}/${count} workflows succeeded; stopping it`,
      );
      return { ...settled, timedOut: true };
    }
    await sleep(pollMs);
  }
}

interface Figures {
  backend: Backend;
  workers: number;
  workload: Workload;
  steps: number;
  seconds: number;
  transitions: number;
  counts: QueryCounts | undefined;
  latencies: Latencies;
  settled: Settled;
  agentErrors: number;
  /** CPU time of this process (engine, agents, drivers, PGlite) over the run, in % of one core. */
  processCpu: number;
  /** Busy time of the whole machine over the run, in % of all its cores. */
  machineCpu: number;
  /** MultiXact ids the server handed out during the run (row locks shared by several transactions); PostgreSQL only. */
  multixacts: number | undefined;
}

/** The server's MultiXact counter (how many it handed out so far), from mxid_age of the first one. */
async function multixactCounter(lab: Lab): Promise<number | undefined> {
  if (lab.backend !== 'postgres') return undefined;
  const { rows } = await lab.aux.query<{ n: number }>("SELECT mxid_age('1'::xid)::int AS n");
  return rows[0]?.n;
}

/** The machine's busy and total jiffies from /proc/stat (zeros where there is none). */
function machineTicks(): { busy: number; total: number } {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
    const values = line.trim().split(/\s+/).slice(1).map(Number);
    const total = values.reduce((a, b) => a + b, 0);
    const idle = (values[3] ?? 0) + (values[4] ?? 0);
    return { busy: total - idle, total };
  } catch {
    return { busy: 0, total: 0 };
  }
}

/** Steps that ended `succeeded`, and the engine's transition events (every workflow event but `workflow.created`). */
async function tally(sql: SqlExecutor): Promise<{ steps: number; transitions: number; lastFinish: number }> {
  const steps = await sql.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM workflow_steps WHERE state = 'succeeded'",
  );
  const events = await sql.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM events WHERE type LIKE 'workflow.%' AND type <> 'workflow.created'",
  );
  const last = await sql.query<{ at: Date | null }>('SELECT max(finished_at) AS at FROM workflows');
  return {
    steps: steps.rows[0]?.n ?? 0,
    transitions: events.rows[0]?.n ?? 0,
    lastFinish: last.rows[0]?.at ? new Date(last.rows[0].at).getTime() : Date.now(),
  };
}

/** Result→next command waits (ms), one per answered command but the last of each workflow. */
interface Latencies {
  /** Until the statement or transaction that inserted the next command committed (seen by the engine's client). */
  sent: number[];
  /** Until the next command's `created_at` (when the pass planned it, before writing it). */
  planned: number[];
  /** `sent`, for results reported once every workflow had started (after the burst of starts). */
  afterStarts: number[];
}

/** For each answered command, the time from its result to the next command of its workflow. */
async function resultToNextCommand(
  sql: SqlExecutor,
  agents: BulkAgents | AgentsProcess,
  sentAt: ReadonlyMap<string, number>,
): Promise<Latencies> {
  const { rows } = await sql.query<{ id: string; workflow_id: string; created_at: Date }>(
    "SELECT id, workflow_id, created_at FROM commands WHERE kind = 'bench.ping' ORDER BY workflow_id, created_at, id",
  );
  const started = await sql.query<{ at: Date | null }>('SELECT max(started_at) AS at FROM workflows');
  const allStarted = started.rows[0]?.at ? new Date(started.rows[0].at).getTime() : Number.POSITIVE_INFINITY;
  const latencies: Latencies = { sent: [], planned: [], afterStarts: [] };
  for (let i = 0; i + 1 < rows.length; i += 1) {
    const current = rows[i];
    const next = rows[i + 1];
    if (!current || !next || current.workflow_id !== next.workflow_id) continue;
    const done = agents.completed.get(current.id);
    const sent = sentAt.get(next.id);
    if (!done || sent === undefined) continue;
    latencies.sent.push(sent - done.completedAt);
    latencies.planned.push(new Date(next.created_at).getTime() - done.completedAt);
    if (done.completedAt > allStarted) latencies.afterStarts.push(sent - done.completedAt);
  }
  return latencies;
}

async function measure(backend: Backend, workers: number, workload: Workload): Promise<Figures> {
  const what = `${backend}, ${workers} worker${workers > 1 ? 's' : ''}, ${workload}`;
  console.error(`${what}: setting up`);
  const lab = await openLab(backend, workers, workload === 'probe' ? PROBES : workflows);
  const thinkMs = workload === 'fleet' ? FLEET_THINK_MS : 0;
  const agents =
    backend === 'postgres' && AGENTS_WHERE === 'process'
      ? new AgentsProcess(lab.url as string, 'bench.ping', AGENT_CONCURRENCY, thinkMs, AGENTS_NICE)
      : new BulkAgents(lab.aux, lab.compute, 'bench.ping', AGENT_CONCURRENCY, thinkMs);
  try {
    const stepsEach = workload === 'control-plane' ? NOOP_STEPS : AGENT_STEPS;
    if (workload !== 'probe') {
      await startWorkflows(lab, workload === 'control-plane' ? 'bench-noop' : 'bench-agent', lab.nodes);
    }
    // Let the server settle after the setup (and the scenario before): flush dirty pages now rather than mid-run.
    if (backend === 'postgres') await lab.aux.query('CHECKPOINT').catch(() => undefined);
    await sleep(1000);
    console.error(`${what}: running`);
    const mxBefore = await multixactCounter(lab);
    const before = snapshot(lab.counting.counts);
    const cpuBefore = process.cpuUsage();
    const ticksBefore = machineTicks();
    const started = Date.now();
    const deadline = started + timeoutMs;
    if (workload !== 'control-plane') await agents.start();
    await lab.compute.startWorkers(workers);
    let settled: Settled = { succeeded: 0, failed: 0, timedOut: false };
    if (workload === 'probe') {
      // One workflow at a time: start it, wait until it ended, then the next.
      for (const [i, nodeId] of lab.nodes.entries()) {
        await startWorkflows(lab, 'bench-agent', [nodeId]);
        settled = await waitForWorkflows(lab.aux, i + 1, deadline, what, 5);
        if (settled.timedOut) break;
      }
    } else {
      settled = await waitForWorkflows(lab.aux, lab.nodes.length, deadline, what);
    }
    const counts = since(lab.counting.counts, before);
    const cpu = process.cpuUsage(cpuBefore);
    const ticks = machineTicks();
    const wallMs = Date.now() - started;
    const mxAfter = await multixactCounter(lab);
    const { steps, transitions, lastFinish } = await tally(lab.aux);
    await agents.stop();
    await lab.compute.close();
    const seconds = ((settled.timedOut ? Date.now() : lastFinish) - started) / 1000;
    const latencies =
      workload === 'control-plane'
        ? { sent: [], planned: [], afterStarts: [] }
        : await resultToNextCommand(lab.aux, agents, lab.counting.sentAt);
    if (settled.failed > 0) console.error(`${what}: ${settled.failed} workflows failed or were cancelled`);
    if (agents.errors > 0) console.error(`${what}: the agents hit ${agents.errors} errors, last:`, agents.lastError);
    if (steps < settled.succeeded * stepsEach) console.error(`${what}: fewer steps succeeded than expected`);
    return {
      backend,
      workers,
      workload,
      steps,
      seconds,
      transitions,
      counts: workload === 'probe' ? undefined : counts,
      latencies,
      settled,
      agentErrors: agents.errors,
      processCpu: ((cpu.user + cpu.system) / 1000 / wallMs) * 100,
      multixacts: mxBefore === undefined || mxAfter === undefined ? undefined : mxAfter - mxBefore,
      machineCpu: ((ticks.busy - ticksBefore.busy) / Math.max(1, ticks.total - ticksBefore.total)) * 100,
    };
  } finally {
    await agents.stop();
    await lab.close();
  }
}

async function pgbench(clients: number): Promise<number> {
  const scratch = await createBenchDatabase(baseUrl);
  try {
    return await pgbenchInsertTps(scratch.url, clients, PGBENCH_SECONDS);
  } finally {
    await scratch.drop();
  }
}

/** PGlite's own single-row-insert rate: autocommitted inserts one after another on a fresh in-memory PGlite. */
async function pgliteInsertTps(seconds: number): Promise<number> {
  const db = await createPgliteDatabase();
  try {
    await db.query('CREATE TABLE bench_rows (id bigserial PRIMARY KEY, v double precision NOT NULL)');
    const started = performance.now();
    const until = started + seconds * 1000;
    let n = 0;
    while (performance.now() < until) {
      await db.query('INSERT INTO bench_rows (v) VALUES (random())');
      n += 1;
    }
    return n / ((performance.now() - started) / 1000);
  } finally {
    await db.close();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

interface Row {
  figures: Figures;
  reference: { name: string; tps: number };
}

const rows: Row[] = [];
const references: string[] = [];
for (const backend of backends) {
  for (const workers of workerCounts) {
    const measured: Figures[] = [];
    for (const workload of workloads) {
      try {
        measured.push(await measure(backend, workers, workload));
      } catch (err) {
        console.error(`${backend}, ${workers} workers, ${workload}: FAILED`, err);
      }
    }
    let reference: Row['reference'];
    if (backend === 'postgres') {
      const tps = await pgbench(workers);
      references.push(`pgbench single-row insert, ${workers} client(s), ${PGBENCH_SECONDS} s: ${fmt(tps, 0)} TPS`);
      reference = { name: `pgbench ${workers}c`, tps };
    } else {
      const tps = await pgliteInsertTps(PGBENCH_SECONDS);
      references.push(`PGlite single-row insert, one connection, ${PGBENCH_SECONDS} s: ${fmt(tps, 0)} TPS`);
      reference = { name: 'PGlite insert', tps };
    }
    for (const figures of measured) rows.push({ figures, reference });
  }
}

const perStep = (n: number, steps: number) => fmt(n / steps, 2);

console.log(
  `\nengine: ${workflows} concurrent workflows (control-plane: ${NOOP_STEPS} no-op steps each; agent: ${AGENT_STEPS} agent ` +
    `steps each); probe: ${PROBES} agent workflows one at a time; worker concurrency ${concurrency}; ` +
    `server ${new URL(baseUrl).host}; ${new Date().toISOString()}\n`,
);
console.log(
  '| backend | workers | workload | workflows ok | steps/s | transitions/s | commits/s | reference TPS | transitions/s ÷ ref | commits/s ÷ ref | round trips/step | statements/step | commits/step | result→next sent p50 / p99 ms | after the starts p50 / p99 ms | planned p50 / p99 ms | samples | process CPU | machine CPU |',
);
console.log(
  '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
);
for (const { figures: f, reference } of rows) {
  const ok = `${f.settled.succeeded}${f.settled.timedOut ? ' (timed out)' : ''}`;
  const rate = (n: number) => (f.workload === 'probe' ? '—' : fmt(n / f.seconds, 0));
  const c = f.counts;
  const pair = (values: number[]) =>
    values.length > 0 ? `${fmt(percentile(values, 50), 0)} / ${fmt(percentile(values, 99), 0)}` : '—';
  console.log(
    [
      '',
      f.backend,
      f.workers,
      f.workload,
      ok,
      rate(f.steps),
      rate(f.transitions),
      c ? rate(commits(c)) : '—',
      f.workload === 'probe' ? '—' : `${fmt(reference.tps, 0)} (${reference.name})`,
      f.workload === 'probe' ? '—' : fmt(f.transitions / f.seconds / reference.tps, 2),
      c ? fmt(commits(c) / f.seconds / reference.tps, 2) : '—',
      c ? perStep(roundTrips(c), f.steps) : '—',
      c ? perStep(c.statements, f.steps) : '—',
      c ? perStep(commits(c), f.steps) : '—',
      pair(f.latencies.sent),
      pair(f.latencies.afterStarts),
      pair(f.latencies.planned),
      f.latencies.sent.length > 0 ? f.latencies.sent.length : '—',
      `${fmt(f.processCpu, 0)} %`,
      `${fmt(f.machineCpu, 0)} %`,
      '',
    ]
      .join(' | ')
      .trim(),
  );
}
console.log(`\nreferences measured in this run: ${references.join('; ')}`);
console.log(
  '\na round trip: one client↔server exchange the engine waits for; every statement (inside a transaction or not), plus ' +
    'BEGIN and COMMIT of each transaction and SAVEPOINT and RELEASE of each nested one, counted on the database handle ' +
    'given to betterCompute (workers, claims, completions, heartbeats included; setup, the agents and the bench’s own ' +
    'polling excluded). Transitions: the workflow events published while the workers ran (workflow.started, ' +
    'step.started, step.succeeded, workflow.succeeded), one per change of state of a workflow or a step; a step’s ' +
    'settling and the next step’s start are written by one statement. Commits: top-level transactions plus statements ' +
    'that commit on their own (everything but plain reads), workers’ claims and completions included. Latency, from the ' +
    'wall time right after the previous command’s completeCommand transaction committed: sent, to the wall time right ' +
    'after the engine’s statement (or transaction) that inserted the next command committed; after the starts, the ' +
    'same for results reported once every workflow had started; planned, to the next command’s created_at (kernel ' +
    'clock = system clock, ms), stamped when the pass planned it, one round trip before it is sent. process CPU: this process (engine, agents, drivers; PGlite too) in % of ' +
    'one core; machine CPU: all cores busy, PostgreSQL included, in % of all.',
);
for (const { figures: f } of rows) {
  if (!f.counts || f.steps === 0) continue;
  const mx = f.multixacts === undefined ? '' : `; MultiXacts created: ${perStep(f.multixacts, f.steps)} per step`;
  console.log(`\nround trips per step by statement: ${f.backend}, ${f.workers} worker(s), ${f.workload}${mx}`);
  const top = [...f.counts.byText.entries()].filter(([, n]) => n / f.steps >= 0.005).sort((a, b) => b[1] - a[1]);
  for (const [text, n] of top) console.log(`  ${perStep(n, f.steps).padStart(6)}  ${text}`);
}
