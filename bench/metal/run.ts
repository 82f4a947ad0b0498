// bench/metal: `machines` simulated machines (default 1,000) enrolled, inspected, commissioned, deployed
// (metal.deploy-image, a signed catalog image) and released through metal's shipped profiles, on a scratch database
// of the local PostgreSQL, with 1 and 2 workers; the site agent and the machines (the testkit's machine model) in a
// process of their own, answering each command after a think time. Figures: machines per minute through the whole
// cycle, the engine's round trips per step, result→next command latency (p50, p99), and the engine process's heap
// per in-flight workflow.
// Usage: pnpm --filter @better-compute/bench metal [machines]   (see bench/README.md, "Metal", for the knobs)

import { type ChildProcess, fork } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import { fileURLToPath } from 'node:url';
import { writeHeapSnapshot } from 'node:v8';
import { type ApiClient, betterCompute, type Compute, createCredential, type SqlDatabase } from '@better-compute/core';
import { systemClock } from '@better-compute/core/kernel';
import { createPostgresDatabase } from '@better-compute/core/postgres';
import type { MetalApi, SitesApi } from '@better-compute/metal';
import { generateSigningKeyPair, imageSigningBytes, signToBase64Url } from '@better-compute/pki';
import {
  commits,
  countingDatabase,
  type QueryCounts,
  roundTrips,
  since,
  snapshot,
  writeTrace,
} from '../support/counting-database';
import { type PauseReport, pausesDuring, watchPauses } from '../support/pauses';
import { pgbenchInsertTps } from '../support/pgbench';
import { createBenchDatabase } from '../support/scratch-database';
import { fmt, percentile } from '../support/stats';
import type { AgentsReport, ReadyMessage } from './lab';
import { metalLabCompute } from './lab';
import { describeThinkModel, thinkModelFromEnv } from './think-times';

const baseUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const MACHINES = Number(process.argv[2] ?? 1000);
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 16);
const timeoutMs = Number(process.env.BENCH_TIMEOUT_S ?? 240) * 1000;
const workerCounts = (process.env.BENCH_WORKERS ?? '1,2').split(',').map(Number);
/** How long the agents take per command (think-times.ts): realistic times by default, or one mean for all. */
const MODEL = thinkModelFromEnv(process.env);
/** Results in the first seconds of a run (every machine's first commands at once) are left out of the steady figures. */
const WARMUP_MS = Number(process.env.BENCH_WARMUP_S ?? 60) * 1000;
/** The agents' runners (answers carried at once, after their think time). */
const RUNNERS = Number(process.env.BENCH_AGENT_RUNNERS ?? 32);
const AGENTS_NICE = Number(process.env.BENCH_AGENTS_NICE ?? 0);
/** How often the engine's heap is sampled (after a forced GC) while machines are in flight. */
const MEMORY_EVERY_MS = Number(process.env.BENCH_MEMORY_EVERY_S ?? 60) * 1000;
const PGBENCH_SECONDS = 5;
/** Where to write a heap snapshot at each memory sample (`BENCH_HEAP_SNAPSHOTS`, a folder), to see what the heap holds. */
const SNAPSHOT_DIR = process.env.BENCH_HEAP_SNAPSHOTS;
/**
 * Steps one machine's whole cycle succeeds through (enroll 1, inspect 2 + cleanup, commission 6 + acceptance +
 * cleanup, deploy-image 6, release 3), as counted by runs that finished: a run cut off by its timeout reports the
 * machines per minute its steps/s would give.
 */
const STEPS_PER_CYCLE = 21;

if (!['127.0.0.1', 'localhost', '[::1]'].includes(new URL(baseUrl).hostname)) {
  throw new Error(`bench/metal runs against a local server only, not ${new URL(baseUrl).host}`);
}
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('bench/metal measures memory after a forced GC: run node with --expose-gc');

// The agents' bulk poll reads pending commands of any node through this index (see agents-child.ts).
const POLL_INDEX_SQL = `CREATE INDEX IF NOT EXISTS bench_metal_pending_idx ON commands (created_at, id)
  WHERE state = 'pending'`;

type Api = ApiClient<{ metal: MetalApi; sites: SitesApi }>;

/** The agents' process (agents-child.ts) and its IPC. */
class Agents {
  readonly #child: ChildProcess;
  readonly #messages: unknown[] = [];
  readonly #waiting: ((message: unknown) => void)[] = [];

  constructor(url: string, key: Buffer, joinToken: string) {
    const file = fileURLToPath(new URL('./agents-child.ts', import.meta.url));
    this.#child = fork(
      file,
      [url, key.toString('hex'), joinToken, String(MACHINES), JSON.stringify(MODEL), String(RUNNERS)],
      { stdio: 'inherit' },
    );
    if (this.#child.pid !== undefined) setPriority(this.#child.pid, AGENTS_NICE);
    this.#child.on('message', (message) => {
      const waiter = this.#waiting.shift();
      if (waiter) waiter(message);
      else this.#messages.push(message);
    });
    this.#child.once('exit', (code) => {
      for (const waiter of this.#waiting.splice(0)) waiter(new Error(`the agents' process exited (${code})`));
    });
  }

  send(message: unknown): void {
    this.#child.send(message as never);
  }

  async next<T>(): Promise<T> {
    const message = this.#messages.shift() ?? (await new Promise((resolve) => this.#waiting.push(resolve)));
    if (message instanceof Error) throw message;
    return message as T;
  }

  async stop(): Promise<AgentsReport> {
    this.send('stop');
    return this.next<AgentsReport>();
  }

  kill(): void {
    if (this.#child.exitCode === null) this.#child.kill();
  }
}

/** The machine's busy and total jiffies (all cores) from /proc/stat; zeros where there is none. */
function cpuTicks(): { busy: number; total: number } {
  try {
    const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1);
    const values = fields.map(Number);
    const total = values.reduce((a, b) => a + b, 0);
    return { busy: total - (values[3] ?? 0) - (values[4] ?? 0), total };
  } catch {
    return { busy: 0, total: 0 };
  }
}

interface MemorySample {
  atS: number;
  inFlight: number;
  heapUsed: number;
  /** Command ids the counting wrapper holds for the latency figures at that moment (bench instrumentation). */
  instrumented: number;
}

interface Figures {
  workers: number;
  done: number;
  failed: number;
  timedOut: boolean;
  /** Seconds from the workers' start to the last machine available again after its release. */
  seconds: number;
  /** Seconds until every machine was first available (enrolled, inspected, commissioned). */
  commissionedS: number;
  steps: number;
  /** Seconds from the workers' start to the end of the run (the last machine through, or the timeout). */
  wallS: number;
  commands: number;
  counts: QueryCounts;
  /** By statement label: the milliseconds the engine waited for its answers during the run. */
  busyMs: Map<string, number>;
  apiCounts: QueryCounts;
  sent: number[];
  /** The result→next latencies of results after the warm-up (BENCH_WARMUP_S): the steady figure. */
  steady: number[];
  /** From a machine's agent connecting after a boot to the next command of its workflow. */
  afterBoot: number[];
  /** The result→next pairs by what preceded: label → latencies (ms), all and steady. */
  byPrevious: Map<string, { all: number[]; steady: number[] }>;
  /** Pairs whose result the agents recorded after the next command was seen sent (counted at a bound; see resultToNext). */
  inverted: number;
  steadyPairs: Pairs['steadyPairs'];
  /** The engine process's event loop delay and garbage collections during the run. */
  pauses: PauseReport;
  /** Heap after a forced GC before the workers started. */
  baselineHeap: number;
  /** Heap after a forced GC once every machine was through, the workers still running (the idle baseline). */
  idleHeap: number;
  memory: MemorySample[];
  byKind: [string, number][];
  agentErrors: number;
  lastError: string | undefined;
  machineCpu: number;
  processCpu: number;
}

async function measure(workers: number): Promise<Figures> {
  const what = `${workers} worker${workers > 1 ? 's' : ''}`;
  console.error(`${what}: setting up ${MACHINES} machines`);
  const scratch = await createBenchDatabase(baseUrl);
  const key = randomBytes(32);
  const raw = createPostgresDatabase({ url: scratch.url, max: workers * concurrency + 4 });
  const counting = countingDatabase(raw);
  const aux = createPostgresDatabase({ url: scratch.url, max: 4 });
  const apiDb = createPostgresDatabase({ url: scratch.url, max: 8 });
  const apiCounting = countingDatabase(apiDb);
  let engine: Compute | undefined;
  let driver: Compute | undefined;
  let agents: Agents | undefined;
  try {
    engine = await betterCompute({ ...metalLabCompute(counting, key).options, workers: { concurrency } });
    // The API calls of the run (enroll, deploy, release) go through a compute of their own, counted apart.
    const driverLab = metalLabCompute(apiCounting, key);
    driver = await betterCompute(driverLab.options);
    const api = driver.api as unknown as Api;
    await aux.query(POLL_INDEX_SQL);
    await aux.query('INSERT INTO tenants (id, name, created_at) VALUES ($1, $1, $2) ON CONFLICT DO NOTHING', [
      'root',
      new Date(),
    ]);
    const { token } = await createCredential(aux, {
      tenantId: 'root',
      name: 'bench',
      permissions: ['compute:*'],
      clock: systemClock,
    });
    const site = await api.sites.create(token, { tenantId: 'root', name: 'bench-site' });
    const joinToken = await api.sites.joinToken(token, { tenantId: 'root', siteId: site.id });
    const image = await registerImage(aux, driverLab);

    agents = new Agents(scratch.url, key, joinToken.token);
    const ready = await agents.next<ReadyMessage>();
    const nodeIds: string[] = [];
    for (let i = 0; i < ready.machines.length; i += 8) {
      const batch = ready.machines.slice(i, i + 8).map(async (m) => {
        const view = await api.metal.enroll(token, {
          tenantId: 'root',
          siteId: site.id,
          bmc: { address: m.bmcAddress, driver: m.bmcDriver, username: m.username, password: m.password },
          macs: [m.mac],
        });
        return view.nodeId;
      });
      nodeIds.push(...(await Promise.all(batch)));
    }
    agents.send({ type: 'nodes', nodeIds });
    await agents.next<string>();
    await aux.query('CHECKPOINT').catch(() => undefined);
    await sleep(1000);
    gc?.();
    const baselineHeap = process.memoryUsage().heapUsed;

    console.error(`${what}: running`);
    const before = snapshot(counting.counts);
    const busyBefore = new Map(counting.busyMs);
    const apiBefore = snapshot(apiCounting.counts);
    const cpuBefore = process.cpuUsage();
    const ticksBefore = cpuTicks();
    const started = Date.now();
    const watch = watchPauses();
    agents.send('start');
    await engine.startWorkers(workers);

    // Each machine: lifecycle (enroll → inspect → commission → available), then deploy, then release (→ available).
    const phase = new Map<string, 'lifecycle' | 'deploy' | 'release' | 'done' | 'failed'>(
      nodeIds.map((id) => [id, 'lifecycle']),
    );
    let commissionedAt = 0;
    let available = 0;
    let lastDone = started;
    const memory: MemorySample[] = [];
    let nextMemory = started + Math.min(30_000, MEMORY_EVERY_MS / 2);
    let timedOut = false;
    let nextProgress = started + 30_000;
    for (;;) {
      // Only the states the driver acts on: its poll runs in the engine's process, and reading every machine five
      // times a second was the bench's own load on the engine's event loop.
      const { rows } = await aux.query<{ id: string; state: string }>(
        `SELECT id, provision_state AS state FROM nodes
         WHERE kind = 'machine' AND provision_state IN ('available', 'deployed', 'failed')`,
      );
      const calls: Promise<unknown>[] = [];
      for (const { id, state } of rows) {
        const at = phase.get(id);
        if (state === 'failed' && at !== 'done' && at !== 'failed') {
          phase.set(id, 'failed');
          lastDone = Date.now();
        } else if (at === 'lifecycle' && state === 'available') {
          phase.set(id, 'deploy');
          available += 1;
          if (available === nodeIds.length) commissionedAt = Date.now();
          calls.push(api.metal.deploy(token, { tenantId: 'root', nodeId: id, profileId: 'metal.deploy-image', image }));
        } else if (at === 'deploy' && state === 'deployed') {
          phase.set(id, 'release');
          calls.push(api.metal.release(token, { tenantId: 'root', nodeId: id }));
        } else if (at === 'release' && state === 'available') {
          phase.set(id, 'done');
          lastDone = Date.now();
        }
      }
      await Promise.all(calls);
      const left = [...phase.values()].filter((p) => p !== 'done' && p !== 'failed').length;
      if (left === 0) break;
      if (Date.now() - started > timeoutMs) {
        console.error(`${what}: TIMED OUT after ${fmt(timeoutMs / 1000, 0)} s with ${left} machines not through`);
        timedOut = true;
        break;
      }
      if (Date.now() >= nextProgress) {
        nextProgress += 30_000;
        const { rows: states } = await aux.query<{ state: string; n: number }>(
          "SELECT provision_state AS state, count(*)::int AS n FROM nodes WHERE kind = 'machine' GROUP BY 1 ORDER BY 1",
        );
        const by = new Map(states.map(({ state, n }) => [state, n]));
        const through = [...phase.values()].filter((p) => p === 'done').length;
        console.error(
          `${what}: ${fmt((Date.now() - started) / 1000, 0)} s, ${through} through; ${[...by].map(([s, n]) => `${s} ${n}`).join(', ')}`,
        );
      }
      if (Date.now() >= nextMemory) {
        nextMemory += MEMORY_EVERY_MS;
        const { rows: flying } = await aux.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM workflows WHERE finished_at IS NULL',
        );
        watch.mark('forced gc (memory sample)', () => gc?.());
        memory.push({
          atS: (Date.now() - started) / 1000,
          inFlight: flying[0]?.n ?? 0,
          heapUsed: process.memoryUsage().heapUsed,
          instrumented: counting.sentAt.size,
        });
        // To find what a growing heap holds: a V8 heap snapshot per sample (large and slow; diagnosis only).
        if (SNAPSHOT_DIR) writeHeapSnapshot(`${SNAPSHOT_DIR}/metal-${workers}w-${memory.length}.heapsnapshot`);
      }
      await sleep(200);
    }
    const pauses = watch.stop();
    const counts = since(counting.counts, before);
    const busyMs = new Map([...counting.busyMs].map(([label, ms]) => [label, ms - (busyBefore.get(label) ?? 0)]));
    const apiCounts = since(apiCounting.counts, apiBefore);
    const cpu = process.cpuUsage(cpuBefore);
    const ticks = cpuTicks();
    const wallMs = Date.now() - started;
    const report = await agents.stop();

    const { rows: stepRows } = await aux.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM workflow_steps WHERE state = 'succeeded'",
    );
    const { rows: commandRows } = await aux.query<{
      id: string;
      workflow_id: string;
      node_id: string;
      kind: string;
      operation: string | null;
    }>(
      `SELECT c.id, c.workflow_id, w.node_id, c.kind, c.payload->>'operation' AS operation
       FROM commands c JOIN workflows w ON w.id = c.workflow_id ORDER BY c.workflow_id`,
    );
    const { sent, steady, steadyPairs, byPrevious, afterBoot, inverted } = resultToNext(
      commandRows,
      new Map(report.completed),
      new Map(report.completing),
      counting.sentAt,
      new Map(report.connected),
      started + WARMUP_MS,
    );
    // The idle engine after the run, its workers still up: the instrumentation's ids dropped, then a forced GC.
    counting.sentAt.clear();
    report.completed = [];
    report.completing = [];
    report.connected = [];
    await sleep(2_000);
    gc?.();
    const idleHeap = process.memoryUsage().heapUsed;
    await engine.close();
    engine = undefined;
    const phases = [...phase.values()];
    return {
      workers,
      done: phases.filter((p) => p === 'done').length,
      failed: phases.filter((p) => p === 'failed').length,
      timedOut,
      seconds: (lastDone - started) / 1000,
      commissionedS: commissionedAt ? (commissionedAt - started) / 1000 : Number.NaN,
      steps: stepRows[0]?.n ?? 0,
      wallS: wallMs / 1000,
      commands: commandRows.length,
      counts,
      busyMs,
      apiCounts,
      sent,
      steady,
      pauses,
      byPrevious,
      inverted,
      steadyPairs,
      afterBoot,
      baselineHeap,
      idleHeap,
      memory,
      byKind: report.byKind,
      agentErrors: report.errors,
      lastError: report.lastError,
      machineCpu: ((ticks.busy - ticksBefore.busy) / Math.max(1, ticks.total - ticksBefore.total)) * 100,
      processCpu: ((cpu.user + cpu.system) / 1000 / wallMs) * 100,
    };
  } finally {
    agents?.kill();
    await engine?.close();
    await writeTrace(counting);
    await driver?.close();
    await aux.close();
    await apiDb.close();
    await raw.close();
    await scratch.drop();
  }
}

/** A signer and a signed `ubuntu/noble@24.04.1` in root's catalog, as an operator registers an image. */
async function registerImage(sql: SqlDatabase, lab: ReturnType<typeof metalLabCompute>): Promise<string> {
  const signer = generateSigningKeyPair('ed25519');
  const [name, version] = ['ubuntu/noble', '24.04.1'];
  const digest = `sha256:${createHash('sha256').update(`${name}@${version}`).digest('hex')}`;
  await sql.transaction(async (tx) => {
    await lab.security.addImageSigner(tx, {
      tenantId: null,
      public: true,
      name: 'bench',
      publicKey: signer.publicKeyPem,
    });
    await lab.provision.images.register(tx, {
      tenantId: 'root',
      name,
      version,
      digest,
      signature: signToBase64Url(signer.privateKeyPem, imageSigningBytes(digest)),
      url: `https://images.bench.example/${name}/${version}.img`,
    });
  });
  return `${name}@${version}`;
}

/** What resultToNext pairs: a command's result, or a machine's agent connecting after a boot, with the next command. */
interface Pairs {
  sent: number[];
  steady: number[];
  /** By pair of commands (`previous → next`): every latency, and those of the steady figure. */
  byPrevious: Map<string, { all: number[]; steady: number[] }>;
  /** From an agent's connection after a boot to its workflow's next command (the steps that wait for it look again). */
  afterBoot: number[];
  /**
   * Pairs whose result the agents' process recorded after the engine's client saw the next command committed (the
   * engine reacted within the completion statement's round trip): counted at their upper bound, from when the
   * completion statement was sent.
   */
  inverted: number;
  /**
   * Every steady pair, slowest first, with its result's time (wall ms since the epoch): to set beside the process's
   * pauses, and to find the slowest in a `BENCH_TRACE` by the workflow's id and the result's time.
   */
  steadyPairs: { ms: number; pair: string; workflowId: string; resultAt: number }[];
}

/** How many of the slowest steady pairs the report names (with `BENCH_TRACE` set). */
const SLOWEST_SHOWN = 12;

/**
 * Result→next command, per workflow: each result (a command's completeCommand commit, in the agents' process) paired
 * with the first command of its workflow sent after it (the commit that inserted it, seen by the engine's client),
 * unless another result of the workflow came in between (then that one is what the next command followed). A
 * workflow's last result pairs with nothing. When the machine's agent connected after a boot in between (the power
 * cycle's result, then the ramdisk joining), the next command waited for the boot, not the result: that pair counts
 * from the connection, apart (`afterBoot`).
 *
 * Results are ordered by when their completion statement was sent (`completing`), not by when the agents' process saw
 * it commit (`completed`, what the latency counts from): the commit lies between, and the engine can see it and send
 * the next command before the agents' process gets to record it (a busy process). Ordered by the later time, such a
 * result came after the command it caused, which was then paired with an earlier result of the workflow or with none,
 * and the result itself with a later command. Such a pair (`inverted`) is counted at its upper bound: from when the
 * completion statement was sent to the next command's commit (leaving the engine's fastest reactions out would raise
 * every percentile).
 */
function resultToNext(
  rows: readonly { id: string; workflow_id: string; node_id: string; kind: string; operation: string | null }[],
  completed: ReadonlyMap<string, number>,
  completing: ReadonlyMap<string, number>,
  sentAt: ReadonlyMap<string, number>,
  connected: ReadonlyMap<string, number[]>,
  steadyFrom: number,
): Pairs {
  const pairs: Pairs = {
    sent: [],
    steady: [],
    byPrevious: new Map(),
    afterBoot: [],
    inverted: 0,
    steadyPairs: [],
  };
  const label = (row: (typeof rows)[number]) => (row.operation ? `${row.kind} ${row.operation}` : row.kind);
  let i = 0;
  while (i < rows.length) {
    const first = rows[i] as (typeof rows)[number];
    // `order`: when the event could first have been seen (a result: its statement sent); `at`: when it was.
    const events: { order: number; at: number; what: 'result' | 'sent' | 'connected'; label: string }[] = [];
    for (; i < rows.length && rows[i]?.workflow_id === first.workflow_id; i += 1) {
      const row = rows[i] as (typeof rows)[number];
      const done = completed.get(row.id);
      const out = sentAt.get(row.id);
      if (done !== undefined) {
        events.push({ order: completing.get(row.id) ?? done, at: done, what: 'result', label: label(row) });
      }
      if (out !== undefined) events.push({ order: out, at: out, what: 'sent', label: label(row) });
    }
    if (events.length === 0) continue;
    const from = Math.min(...events.map((e) => e.order));
    const to = Math.max(...events.map((e) => e.order));
    for (const at of connected.get(first.node_id) ?? []) {
      if (at > from && at < to) events.push({ order: at, at, what: 'connected', label: 'agent connected' });
    }
    events.sort((a, b) => a.order - b.order);
    for (let j = 0; j + 1 < events.length; j += 1) {
      const [before, next] = [events[j], events[j + 1]];
      if (!before || !next || next.what !== 'sent' || before.what === 'sent') continue;
      let ms = next.at - before.at;
      if (before.what === 'connected') {
        pairs.afterBoot.push(ms);
        continue;
      }
      if (ms < 0) {
        // The engine saw the result's commit first: its latency lies between 0 and the time since the completion
        // statement was sent, and is counted at that bound (never under the truth), not left out.
        pairs.inverted += 1;
        ms = next.at - before.order;
      }
      pairs.sent.push(ms);
      const steady = before.at >= steadyFrom;
      if (steady) pairs.steady.push(ms);
      const key = `${before.label} → ${next.label}`;
      const entry = pairs.byPrevious.get(key) ?? { all: [], steady: [] };
      entry.all.push(ms);
      if (steady) entry.steady.push(ms);
      pairs.byPrevious.set(key, entry);
      if (steady) pairs.steadyPairs.push({ ms, pair: key, workflowId: first.workflow_id, resultAt: before.at });
    }
  }
  pairs.steadyPairs.sort((a, b) => b.ms - a.ms);
  return pairs;
}

async function pgbench(clients: number): Promise<number> {
  const scratch = await createBenchDatabase(baseUrl);
  try {
    return await pgbenchInsertTps(scratch.url, clients, PGBENCH_SECONDS);
  } finally {
    await scratch.drop();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

const results: { figures: Figures; tps: number }[] = [];
for (const workers of workerCounts) {
  try {
    const figures = await measure(workers);
    results.push({ figures, tps: await pgbench(workers) });
  } catch (err) {
    console.error(`${workers} workers: FAILED`, err);
  }
}

/**
 * What one command id held by the counting wrapper's `sentAt` costs the heap (a map entry: an id string and a time),
 * measured here the same way, to take the instrumentation out of the engine's memory figure.
 */
function bytesPerInstrumentedId(): number {
  const n = 20_000;
  gc?.();
  const before = process.memoryUsage().heapUsed;
  const ids = new Map<string, number>();
  for (let i = 0; i < n; i += 1) ids.set(`cmd_${randomBytes(13).toString('hex').slice(0, 26)}`, Date.now() + i / 7);
  gc?.();
  const bytes = (process.memoryUsage().heapUsed - before) / ids.size;
  ids.clear();
  return bytes;
}

const perId = bytesPerInstrumentedId();
const kb = (bytes: number) => fmt(bytes / 1024, 1);
/** The engine's heap per in-flight workflow in a sample: above the idle engine, the instrumentation's ids taken out. */
// A run cut off by its timeout still has its workflows in flight after it, so its post-run heap is no idle baseline:
// the pre-start heap is used instead (an upper bound: it also counts what the workers allocate for good).
const perWorkflow = (f: Figures, m: MemorySample) =>
  (m.heapUsed - (f.timedOut ? f.baselineHeap : f.idleHeap) - m.instrumented * perId) / m.inFlight;
console.log(
  `\nmetal: ${MACHINES} machines through enroll → inspect → commission → deploy (metal.deploy-image) → release, ` +
    `${describeThinkModel(MODEL)}, ${RUNNERS} runners; worker concurrency ${concurrency}; ` +
    `steady figures from ${WARMUP_MS / 1000} s on; ` +
    `server ${new URL(baseUrl).host}; ${new Date().toISOString()}\n`,
);
console.log(
  '| workers | machines through | failed | seconds | machines/min | steps/s | machines/min at steps/s ÷ 21 | all commissioned at | steps | commands | round trips/step | round trips/command | commits/step | API round trips | result→next sent p50 / p90 / p99 ms | samples | steady p50 / p99 ms (samples) | heap/in-flight workflow | pgbench TPS | process CPU | machine CPU |',
);
console.log(
  '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
);
for (const { figures: f, tps } of results) {
  const c = f.counts;
  const loaded = f.memory.filter((m) => m.inFlight > 0).sort((a, b) => b.inFlight - a.inFlight)[0];
  const memory = loaded ? `${kb(perWorkflow(f, loaded))} KB (${loaded.inFlight})` : '—';
  const p = (q: number) => fmt(percentile(f.sent, q), 0);
  console.log(
    [
      '',
      f.workers,
      `${f.done}${f.timedOut ? ' (timed out)' : ''}`,
      f.failed,
      fmt(f.seconds, 0),
      f.done > 0 ? fmt((f.done / f.seconds) * 60, 0) : '—',
      fmt(f.steps / f.wallS, 1),
      fmt(((f.steps / f.wallS) * 60) / STEPS_PER_CYCLE, 0),
      `${fmt(f.commissionedS, 0)} s`,
      f.steps,
      f.commands,
      fmt(roundTrips(c) / f.steps, 2),
      fmt(roundTrips(c) / f.commands, 2),
      fmt(commits(c) / f.steps, 2),
      roundTrips(f.apiCounts),
      f.sent.length > 0 ? `${p(50)} / ${p(90)} / ${p(99)}` : '—',
      f.sent.length,
      f.steady.length > 0
        ? `${fmt(percentile(f.steady, 50), 0)} / ${fmt(percentile(f.steady, 99), 1)} (${f.steady.length})`
        : '—',
      memory,
      fmt(tps, 0),
      `${fmt(f.processCpu, 0)} %`,
      `${fmt(f.machineCpu, 0)} %`,
      '',
    ]
      .join(' | ')
      .trim(),
  );
}
for (const { figures: f } of results) {
  console.log(
    `\n${f.workers} worker(s): heap after a forced GC: before the workers started ${kb(f.baselineHeap)} KB; idle ` +
      `after the run, workers up ${kb(f.idleHeap)} KB; one instrumentation id ${fmt(perId, 0)} bytes`,
  );
  for (const m of f.memory) {
    const per = m.inFlight > 0 ? `${kb(perWorkflow(f, m))} KB per in-flight workflow` : '';
    console.log(
      `  at ${fmt(m.atS, 0)} s: ${m.inFlight} in flight, heap ${kb(m.heapUsed)} KB (+${kb(m.heapUsed - f.idleHeap)} over idle, ` +
        `${m.instrumented} instrumentation ids) ${per}; over the pre-start heap ${kb((m.heapUsed - f.baselineHeap) / Math.max(1, m.inFlight))} KB each`,
    );
  }
  if (f.agentErrors > 0) console.log(`  the agents hit ${f.agentErrors} errors, last: ${f.lastError}`);
  console.log('  commands answered by kind:', f.byKind.map(([k, n]) => `${k} ${n}`).join(', '));
  if (f.afterBoot.length > 0) {
    console.log(
      `  agent connected after a boot → next command: ${f.afterBoot.length}, p50 / p99 ` +
        `${fmt(percentile(f.afterBoot, 50), 0)} / ${fmt(percentile(f.afterBoot, 99), 0)} ms`,
    );
  }
  if (f.inverted > 0) {
    console.log(
      `  result→next pairs counted at their upper bound (from the completion's send), the result recorded after the next command was seen sent: ${f.inverted}`,
    );
  }
  console.log(
    '  result→next by what preceded: all (n, p50 / p99 ms, share of samples over 20 ms) | steady (n, p50 / p99 ms):',
  );
  const over = f.sent.filter((ms) => ms > 20).length;
  const ranked = [...f.byPrevious.entries()].sort((a, b) => b[1].all.length - a[1].all.length);
  for (const [pair, { all, steady }] of ranked) {
    const slow = all.filter((ms) => ms > 20).length;
    const steadyPart =
      steady.length > 0
        ? `${steady.length}, ${fmt(percentile(steady, 50), 0)} / ${fmt(percentile(steady, 99), 0)}`
        : '0';
    console.log(
      `    ${pair}: ${all.length}, ${fmt(percentile(all, 50), 0)} / ${fmt(percentile(all, 99), 0)}, ` +
        `${over ? fmt((slow / over) * 100, 0) : 0} % of the slow | ${steadyPart}`,
    );
  }
  printPauses(f);
  if (process.env.BENCH_TRACE) {
    console.log(
      '  slowest steady result→next (ms, pair, workflow, result at: wall ms since the epoch; pauses during it):',
    );
    for (const s of f.steadyPairs.slice(0, SLOWEST_SHOWN)) {
      const during = pausesDuring(f.pauses.pauses, s.resultAt, s.ms).map((p) => `${p.what} ${fmt(p.ms, 1)} ms`);
      console.log(
        `    ${fmt(s.ms, 1)}  ${s.pair}  ${s.workflowId}  ${s.resultAt.toFixed(1)}${during.length ? `  (${during.join(', ')})` : ''}`,
      );
    }
  }
  console.log(`  round trips per step by statement, and the ms waited for them per step (${f.steps} steps):`);
  const top = [...f.counts.byText.entries()].filter(([, n]) => n / f.steps >= 0.01).sort((a, b) => b[1] - a[1]);
  // Beside each count, the time the engine waited for those answers per step: where the database's time goes.
  for (const [text, n] of top) {
    const ms = (f.busyMs.get(text) ?? 0) / f.steps;
    console.log(`    ${fmt(n / f.steps, 2).padStart(6)}  ${fmt(ms, 2).padStart(7)} ms  ${text}`);
  }
}

/**
 * The engine process's own pauses beside the steady pairs: its event loop's delay, its garbage collections, the
 * bench's forced ones (memory samples), and the steady p99 without the pairs those forced collections overlapped.
 */
function printPauses(f: Figures): void {
  const { loopDelay, pauses } = f.pauses;
  const gcs = pauses.filter((p) => p.what.startsWith('gc'));
  const forced = pauses.filter((p) => p.what.startsWith('forced'));
  const total = gcs.reduce((sum, p) => sum + p.ms, 0);
  const longest = gcs.reduce((max, p) => Math.max(max, p.ms), 0);
  console.log(
    `  engine process: event loop delay p50 / p99 / max ${fmt(loopDelay.p50, 1)} / ${fmt(loopDelay.p99, 1)} / ` +
      `${fmt(loopDelay.max, 1)} ms; garbage collections of 1 ms or more ${gcs.length} (${fmt(total, 0)} ms in all, ` +
      `longest ${fmt(longest, 1)}, ${gcs.filter((p) => p.ms >= 10).length} of 10 ms or more); forced for memory ` +
      `samples: ${forced.map((p) => `${fmt(p.ms, 0)} ms`).join(', ') || 'none'}`,
  );
  if (f.steadyPairs.length === 0) return;
  const paused = f.steadyPairs.filter((s) => pausesDuring(pauses, s.resultAt, s.ms).some((p) => p.ms >= 5));
  const unforced = f.steadyPairs.filter((s) => pausesDuring(forced, s.resultAt, s.ms).length === 0).map((s) => s.ms);
  console.log(
    `  steady pairs during a pause of 5 ms or more: ${paused.length} of ${f.steadyPairs.length}; steady p99 without ` +
      `the pairs a memory sample's forced GC overlapped: ${fmt(percentile(unforced, 99), 1)} ms (${unforced.length})`,
  );
}
