// bench/agent-api: BENCH_AGENTS simulated agents (default 1,000) long-polling the server (apps/server, the entry `pnpm
// start` runs, as a child process, role api, on a scratch database of the local PostgreSQL) over HTTPS with their own
// client certificates, in a process of their own; this process enqueues commands through core's command queue on its
// own pool. Figures: enqueue→received latency (p50, p99) at a steady rate, commands/s through the full HTTP cycle
// (poll, ack, start, complete) with a backlog, and the server's memory per connected agent; beside the same workload
// through in-process calls (the kernel's pollCommands / ack / start / complete on one pool) and pgbench's insert TPS.
// Usage: pnpm --filter @better-compute/bench agent-api   (see bench/README.md, "Agent API", for the knobs)

import { type ChildProcess, fork, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { get as httpsGet } from 'node:https';
import { setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { betterCompute, type Compute, type SqlDatabase } from '@better-compute/core';
import { systemClock } from '@better-compute/core/kernel';
import { createPostgresDatabase } from '@better-compute/core/postgres';
import { pki } from '@better-compute/pki';
import { insertNode } from '@better-compute/testkit';
import { benchModule } from '../engine/bench-module';
import { pgbenchInsertTps } from '../support/pgbench';
import { createBenchDatabase } from '../support/scratch-database';
import { fmt, percentile } from '../support/stats';
import { measureBareTls } from './bare-tls';
import { type AgentsConfig, type ChildMessage, type ParentMessage, type Receipt, wallMs } from './protocol';

const env = process.env;
const baseUrl = env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const AGENTS = Number(env.BENCH_AGENTS ?? 1000);
/** The steady phase: commands per second (round robin over the agents), for this many seconds. */
const RATE = Number(env.BENCH_RATE ?? 100);
const DURATION_S = Number(env.BENCH_DURATION_S ?? 60);
/** The throughput phase: commands queued per agent, as fast as the driver can. */
const BACKLOG = Number(env.BENCH_BACKLOG ?? 3);
/** Commands an agent takes per poll: 1, so every command goes through the whole cycle (poll, ack, start, complete). */
const POLL_LIMIT = Number(env.BENCH_POLL_LIMIT ?? 1);
const WAIT_MS = Number(env.BENCH_WAIT_MS ?? 25_000);
const MODES = (env.BENCH_MODES ?? 'inproc,http').split(',').map((mode) => mode.trim());
const SERVER_LOG_LEVEL = env.BENCH_SERVER_LOG_LEVEL ?? 'info';
const AGENTS_NICE = Number(env.BENCH_AGENTS_NICE ?? 0);
const JOIN_CONCURRENCY = Number(env.BENCH_JOIN_CONCURRENCY ?? 16);
/** Agents start polling spread over this many seconds (uniformly), as agents that did not all connect at once. */
const START_SPREAD_MS = Number(env.BENCH_START_SPREAD_S ?? 5) * 1000;
/** The in-process agents' pool: the server's own pool is postgres.js's default of 10. */
const INPROC_POOL = Number(env.BENCH_INPROC_POOL ?? 10);
const PHASE_TIMEOUT_MS = Number(env.BENCH_PHASE_TIMEOUT_S ?? 180) * 1000;
const PGBENCH_SECONDS = 5;
/** Extra node arguments for the server process (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`), split on spaces. */
const SERVER_NODE_ARGS = (env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);
const ENQUEUE_BATCH = 100;
/** Agents that go through the whole cycle on the server before its baseline memory is read, then leave. */
const WARMUP_AGENTS = Number(env.BENCH_WARMUP_AGENTS ?? 20);

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
if (!['127.0.0.1', 'localhost', '[::1]'].includes(new URL(baseUrl).hostname)) {
  throw new Error(`bench/agent-api runs against a local server only, not ${new URL(baseUrl).host}`);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const log = (line: string) => console.error(`[${new Date().toISOString().slice(11, 19)}] ${line}`);

/** The agents' process (agents-child.ts). */
class Agents {
  readonly #child: ChildProcess;
  readonly #messages: ChildMessage[] = [];
  readonly #waiting: ((message: ChildMessage | Error) => void)[] = [];

  constructor(config: AgentsConfig) {
    const file = fileURLToPath(new URL('./agents-child.ts', import.meta.url));
    this.#child = fork(file, [JSON.stringify(config)], { stdio: 'inherit' });
    if (this.#child.pid !== undefined) setPriority(this.#child.pid, AGENTS_NICE);
    this.#child.on('message', (message: ChildMessage) => {
      const waiter = this.#waiting.shift();
      if (waiter) waiter(message);
      else this.#messages.push(message);
    });
    this.#child.once('exit', (code) => {
      for (const waiter of this.#waiting.splice(0)) waiter(new Error(`the agents' process exited (${code})`));
    });
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  async next<T extends ChildMessage['type']>(type: T): Promise<Extract<ChildMessage, { type: T }>> {
    const message = this.#messages.shift() ?? (await new Promise<ChildMessage | Error>((r) => this.#waiting.push(r)));
    if (message instanceof Error) throw message;
    if (message.type !== type) throw new Error(`expected ${type} from the agents, got ${message.type}`);
    return message as Extract<ChildMessage, { type: T }>;
  }

  ask<T extends ChildMessage['type']>(message: ParentMessage, type: T) {
    this.#child.send(message);
    return this.next(type);
  }

  async stop(): Promise<void> {
    if (this.#child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.#child.once('exit', resolve));
    this.#child.send('stop');
    await Promise.race([exited, sleep(5_000)]);
    if (this.#child.exitCode === null) this.#child.kill();
  }
}

/** CPU seconds a process has used (user + system), from /proc/<pid>/stat. */
function processCpuS(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/** The machine's busy and total jiffies (all cores) from /proc/stat. */
function machineTicks(): { busy: number; total: number } {
  const values = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
  const total = values.reduce((a, b) => a + b, 0);
  return { busy: total - (values[3] ?? 0) - (values[4] ?? 0), total };
}

/** CPU use over a phase: this many cores' worth of each process, and the machine's share busy. */
function cpuMeter(pids: Record<string, number | undefined>) {
  const t0 = performance.now();
  const before = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, processCpuS(pid)]));
  const machine = machineTicks();
  return () => {
    const seconds = (performance.now() - t0) / 1000;
    const after = machineTicks();
    const cores = Object.fromEntries(
      Object.entries(pids).map(([name, pid]) => [name, (processCpuS(pid) - (before[name] ?? 0)) / seconds]),
    );
    return { cores, machine: (after.busy - machine.busy) / Math.max(1, after.total - machine.total) };
  };
}

interface Steady {
  sent: number;
  received: number;
  /** From the enqueueing transaction's COMMIT answered to the agent holding the command (ms). */
  fromCommit: number[];
  /** From the enqueue call's start (before BEGIN) to the agent holding the command (ms). */
  fromStart: number[];
  /** From the COMMIT to complete's answer back at the agent (the whole cycle, ms). */
  toCompleted: number[];
  /** How far behind its schedule the driver started an enqueue, at worst (ms). */
  maxLateMs: number;
  /** The correction applied to the agents' stamps (ms; see steadyPhase). */
  shift: number;
  /** The server's event-loop delay over the phase and its GC time (http). */
  server?: string;
  cpu: ReturnType<ReturnType<typeof cpuMeter>>;
}

interface Throughput {
  commands: number;
  completed: number;
  /** From the first enqueue's start to the last complete's answer. */
  seconds: number;
  /** From the first enqueue's start to the last enqueue's commit. */
  enqueueSeconds: number;
  cpu: ReturnType<ReturnType<typeof cpuMeter>>;
}

interface ModeFigures {
  mode: 'inproc' | 'http';
  setupS: number;
  steady: Steady;
  throughput: Throughput;
  errors: number;
  lastError?: string;
  memory?: Memory;
}

interface MemorySample {
  rssKb: number;
  heapUsedKb: number;
  /** Memory of Buffers and other objects outside the V8 heap (prom-client's `nodejs_external_memory_bytes`). */
  externalKb: number;
}

interface Memory {
  none: MemorySample;
  connected: MemorySample;
  polling: number;
  after: MemorySample;
}

let enqueueSeq = 0;
function newCommand(nodeId: string, prefix: string) {
  enqueueSeq += 1;
  return {
    nodeId,
    kind: 'bench.ping',
    payload: {},
    key: `${prefix}-${enqueueSeq}`,
    notAfter: new Date(Date.now() + 30 * 60_000),
  };
}

async function waitForCompleted(agents: Agents, target: number, timeoutMs: number): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  let completed = 0;
  while (performance.now() < deadline) {
    completed = (await agents.ask('count', 'count')).completed;
    if (completed >= target) return completed;
    await sleep(200);
  }
  return completed;
}

/** One command per agent in turn, RATE a second for DURATION_S: the latency with the agents holding their polls. */
async function steadyPhase(
  compute: Compute,
  db: SqlDatabase,
  nodeIds: string[],
  agents: Agents,
  pids: Record<string, number | undefined>,
): Promise<Steady> {
  const total = Math.round(RATE * DURATION_S);
  const base = (await agents.ask('count', 'count')).completed;
  const sent = new Map<string, { startAt: number; committedAt: number }>();
  const meter = cpuMeter(pids);
  const pending = new Set<Promise<void>>();
  let maxLateMs = 0;
  const t0 = performance.now();
  for (let i = 0; i < total; i++) {
    const due = t0 + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    maxLateMs = Math.max(maxLateMs, performance.now() - due);
    const command = newCommand(nodeIds[i % nodeIds.length] as string, 's');
    const done: Promise<void> = (async () => {
      const startAt = wallMs();
      const enqueued = await db.transaction((tx) => compute.commands.enqueue(tx, command));
      sent.set(enqueued.id, { startAt, committedAt: wallMs() });
    })().finally(() => pending.delete(done));
    pending.add(done);
  }
  await Promise.all(pending);
  await waitForCompleted(agents, base + total, 30_000);
  const cpu = meter();
  const report = await agents.ask('report', 'report');
  // Each process stamps with its own time origin plus the monotonic clock; the two origins can disagree by a
  // millisecond or so (and the monotonic clocks drift from the wall clock apart): the agents' stamps are moved onto
  // this process's by the difference of the two processes' (Date.now() − stamp) read now.
  const shift = report.clockOffsetMs - (Date.now() - wallMs());
  const fromCommit: number[] = [];
  const fromStart: number[] = [];
  const toCompleted: number[] = [];
  for (const [id, receivedStamp, completedStamp] of report.receipts) {
    const at = sent.get(id);
    if (!at) continue;
    const receivedAt = receivedStamp + shift;
    const completedAt = completedStamp + shift;
    fromCommit.push(receivedAt - at.committedAt);
    fromStart.push(receivedAt - at.startAt);
    toCompleted.push(completedAt - at.committedAt);
  }
  return { sent: sent.size, received: fromCommit.length, fromCommit, fromStart, toCompleted, maxLateMs, shift, cpu };
}

/** BACKLOG commands per agent queued as fast as the driver can (batches of 100), worked off one per poll. */
async function throughputPhase(
  compute: Compute,
  db: SqlDatabase,
  nodeIds: string[],
  agents: Agents,
  pids: Record<string, number | undefined>,
): Promise<Throughput> {
  const base = (await agents.ask('count', 'count')).completed;
  const batches: string[][] = [];
  for (let round = 0; round < BACKLOG; round++) {
    for (let i = 0; i < nodeIds.length; i += ENQUEUE_BATCH) batches.push(nodeIds.slice(i, i + ENQUEUE_BATCH));
  }
  const commands = batches.reduce((sum, batch) => sum + batch.length, 0);
  const meter = cpuMeter(pids);
  const startAt = wallMs();
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < batches.length) {
        const batch = batches[next++] as string[];
        await db.transaction(async (tx) => {
          for (const nodeId of batch) await compute.commands.enqueue(tx, newCommand(nodeId, 't'));
        });
      }
    }),
  );
  const enqueuedAt = wallMs();
  const completed = (await waitForCompleted(agents, base + commands, PHASE_TIMEOUT_MS)) - base;
  const cpu = meter();
  const report = await agents.ask('report', 'report');
  const shift = report.clockOffsetMs - (Date.now() - wallMs());
  const last = report.receipts.reduce((max, [, , completedAt]: Receipt) => Math.max(max, completedAt + shift), startAt);
  return {
    commands,
    completed,
    seconds: (last - startAt) / 1000,
    enqueueSeconds: (enqueuedAt - startAt) / 1000,
    cpu,
  };
}

/** The server's /metrics text. */
function scrape(metricsUrl: string, ca: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    httpsGet(metricsUrl, { ca }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      res.on('error', reject);
    }).on('error', reject);
  });
}

/**
 * The server's event-loop delay (prom-client's, over the time since the previous scrape: p50 / p99 / max ms) and the
 * seconds its GC took since it started, by kind.
 */
async function loopAndGc(metricsUrl: string, ca: string): Promise<string> {
  const text = await scrape(metricsUrl, ca);
  const value = (name: string) => Number(new RegExp(`^${name}\\s+([0-9.e+-]+)`, 'm').exec(text)?.[1] ?? Number.NaN);
  const lag = ['p50', 'p99', 'max'].map((q) => fmt(value(`better_compute_nodejs_eventloop_lag_${q}_seconds`) * 1000));
  const gc = [...text.matchAll(/^better_compute_nodejs_gc_duration_seconds_sum\{kind="(\w+)"\}\s+([0-9.e+-]+)/gm)]
    .map(([, kind, seconds]) => `${kind} ${fmt(Number(seconds), 2)} s`)
    .join(', ');
  return `event-loop delay p50 / p99 / max ${lag.join(' / ')} ms; GC since start ${gc}`;
}

/** The server's RSS (/proc/<pid>/status) and V8 heap in use (its /metrics, prom-client's process metrics). */
async function sampleMemory(pid: number, metricsUrl: string, ca: string): Promise<MemorySample> {
  const samples: MemorySample[] = [];
  for (let i = 0; i < 5; i++) {
    process.kill(pid, 'SIGUSR2');
    await sleep(300);
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN);
    const text = await scrape(metricsUrl, ca);
    const heap = Number(/^better_compute_nodejs_heap_size_used_bytes\s+([0-9.e+]+)/m.exec(text)?.[1] ?? Number.NaN);
    const external = Number(
      /^better_compute_nodejs_external_memory_bytes\s+([0-9.e+]+)/m.exec(text)?.[1] ?? Number.NaN,
    );
    samples.push({ rssKb, heapUsedKb: heap / 1024, externalKb: external / 1024 });
    await sleep(500);
  }
  return {
    rssKb: percentile(
      samples.map((s) => s.rssKb),
      50,
    ),
    heapUsedKb: percentile(
      samples.map((s) => s.heapUsedKb),
      50,
    ),
    externalKb: percentile(
      samples.map((s) => s.externalKb),
      50,
    ),
  };
}

interface Server {
  pid: number;
  agentUrl: string;
  metricsUrl: string;
  ca: string;
  stop(): Promise<void>;
}

/** apps/server as `pnpm start` runs it (node --conditions=source --import tsx apps/server/src/main.ts), role api. */
async function startServer(url: string, key: Buffer, dataDir: string): Promise<Server> {
  const logFile = join(dataDir, 'server.log');
  const logFd = openSync(logFile, 'a');
  // The one addition: a preload that runs a full GC on SIGUSR2, for the memory samples (server-gc.mjs).
  const gcHook = fileURLToPath(new URL('./server-gc.mjs', import.meta.url));
  const args = ['--expose-gc', '--import', gcHook, ...SERVER_NODE_ARGS];
  const child = spawn(
    process.execPath,
    [...args, '--conditions=source', '--import', 'tsx', 'apps/server/src/main.ts'],
    {
      cwd: repoRoot,
      env: {
        ...process.env,
        DATABASE_URL: url,
        ROLE: 'api',
        HOST: '127.0.0.1',
        PORT: '0',
        AGENT_PORT: '0',
        DATA_DIR: dataDir,
        BETTER_COMPUTE_SECRET_KEY: key.toString('hex'),
        LOG_LEVEL: SERVER_LOG_LEVEL,
      },
      stdio: ['ignore', 'pipe', logFd],
    },
  );
  closeSync(logFd);
  let out = '';
  const banner = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not start in 120 s; see ${logFile}`)), 120_000);
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
      if (/agent API\s+\S+/.test(out) && /CA\s+\S+/.test(out)) {
        clearTimeout(timer);
        resolve(out);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the server exited (${code}); see ${logFile}`));
    });
  });
  const agentUrl = (/agent API\s+(https:\/\/[^/\s]+)/.exec(banner)?.[1] ?? '') as string;
  const apiUrl = (/operator API\s+(https:\/\/[^/\s]+)/.exec(banner)?.[1] ?? '') as string;
  const caFile = (/CA\s+(\S+)/.exec(banner)?.[1] ?? '') as string;
  if (!child.pid || !agentUrl || !apiUrl || !caFile) throw new Error(`unexpected banner:\n${banner}`);
  return {
    pid: child.pid,
    agentUrl,
    metricsUrl: `${apiUrl}/metrics`,
    ca: readFileSync(caFile, 'utf8'),
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(35_000)]);
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}

async function runMode(mode: 'inproc' | 'http'): Promise<ModeFigures> {
  log(`${mode}: setting up ${AGENTS} agents (load ${loadavg()})`);
  const scratch = await createBenchDatabase(baseUrl);
  const key = randomBytes(32);
  const dataDir = mkdtempSync(join(tmpdir(), 'bc-bench-agent-api-'));
  const db = createPostgresDatabase({ url: scratch.url, max: 8 });
  let server: Server | undefined;
  let agents: Agents | undefined;
  let compute: Compute | undefined;
  try {
    let config: AgentsConfig;
    if (mode === 'http') {
      // The server migrates; the driver's compute (the bench's command kind only) finds nothing left to apply.
      server = await startServer(scratch.url, key, dataDir);
      compute = await betterCompute({ database: db, modules: [benchModule] });
      await db.query('INSERT INTO tenants (id, name, created_at) VALUES ($1, $1, $2) ON CONFLICT DO NOTHING', [
        'root',
        new Date(),
      ]);
      const security = pki({ key, clock: systemClock });
      const { token } = await db.transaction((tx) =>
        security.issueJoinToken(tx, {
          tenantId: 'root',
          role: 'discovery',
          ttlSeconds: 3600,
          maxUses: AGENTS + WARMUP_AGENTS,
        }),
      );
      config = {
        mode,
        agents: AGENTS,
        baseUrl: server.agentUrl,
        ca: server.ca,
        token,
        pollLimit: POLL_LIMIT,
        waitMs: WAIT_MS,
        joinConcurrency: JOIN_CONCURRENCY,
        startSpreadMs: START_SPREAD_MS,
      };
    } else {
      compute = await betterCompute({ database: db, modules: [benchModule] });
      const nodeIds: string[] = [];
      for (let i = 0; i < AGENTS; i++) nodeIds.push(await insertNode(db, { name: `bench-${i}` }, systemClock));
      config = {
        mode,
        agents: AGENTS,
        url: scratch.url,
        pollLimit: POLL_LIMIT,
        waitMs: WAIT_MS,
        poolMax: INPROC_POOL,
        nodeIds,
        startSpreadMs: START_SPREAD_MS,
      };
    }
    if (config.mode === 'http' && WARMUP_AGENTS > 0) {
      // A few agents join and work a backlog first, so the baseline is a warmed-up server (code loaded and compiled).
      const warm = new Agents({ ...config, agents: WARMUP_AGENTS, startSpreadMs: 0 });
      const warmReady = await warm.next('ready');
      await throughputPhase(compute, db, warmReady.nodeIds, warm, {});
      await warm.stop();
      await sleep(3_000);
    }
    await db.query('CHECKPOINT');
    const none = server ? await sampleMemory(server.pid, server.metricsUrl, server.ca) : undefined;
    agents = new Agents(config);
    const ready = await agents.next('ready');
    log(`${mode}: ${ready.nodeIds.length} agents ready in ${fmt(ready.setupMs / 1000)} s, ${ready.polling} polls held`);
    await sleep(3_000);
    let memory: Memory | undefined;
    if (server && none) {
      const connected = await sampleMemory(server.pid, server.metricsUrl, server.ca);
      memory = { none, connected, polling: (await agents.ask('count', 'count')).polling, after: none };
    }
    const pids = server ? { server: server.pid, agents: agents.pid } : { agents: agents.pid };
    log(`${mode}: steady, ${RATE}/s for ${DURATION_S} s (load ${loadavg()})`);
    if (server) await loopAndGc(server.metricsUrl, server.ca);
    const steady = await steadyPhase(compute, db, ready.nodeIds, agents, pids);
    if (server) steady.server = await loopAndGc(server.metricsUrl, server.ca);
    log(`${mode}: throughput, ${BACKLOG} per agent (load ${loadavg()})`);
    const throughput = await throughputPhase(compute, db, ready.nodeIds, agents, pids);
    const report = await agents.ask('report', 'report');
    await agents.stop();
    if (server && memory) {
      await sleep(5_000);
      memory.after = await sampleMemory(server.pid, server.metricsUrl, server.ca);
    }
    return {
      mode,
      setupS: ready.setupMs / 1000,
      steady,
      throughput,
      errors: report.errors,
      ...(report.lastError ? { lastError: report.lastError } : {}),
      ...(memory ? { memory } : {}),
    };
  } finally {
    await agents?.stop().catch(() => undefined);
    await server?.stop().catch(() => undefined);
    await compute?.close().catch(() => undefined);
    await db.close().catch(() => undefined);
    await scratch.drop().catch((error) => log(`could not drop ${scratch.url}: ${String(error)}`));
    // The server's errors (JSON log lines of level error and above), a few of them, so a run says what went wrong.
    try {
      const errorLines = readFileSync(join(dataDir, 'server.log'), 'utf8')
        .split('\n')
        .filter((line) => /"level":"(error|fatal)"/.test(line));
      if (errorLines.length > 0)
        log(`${mode}: the server logged ${errorLines.length} errors, e.g.\n${errorLines.slice(0, 3).join('\n')}`);
    } catch {
      // No log (inproc, or the server never started).
    }
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function pgbench(): Promise<[number, number]> {
  const scratch = await createBenchDatabase(baseUrl);
  try {
    return [
      await pgbenchInsertTps(scratch.url, 1, PGBENCH_SECONDS),
      await pgbenchInsertTps(scratch.url, 2, PGBENCH_SECONDS),
    ];
  } finally {
    await scratch.drop();
  }
}

const startedAt = new Date();
const loadBefore = loadavg();
log(
  `bench/agent-api: ${AGENTS} agents, modes ${MODES.join(', ')}; steady ${RATE}/s × ${DURATION_S} s; backlog ${BACKLOG}/agent; poll limit ${POLL_LIMIT}; load ${loadBefore}`,
);
const results: ModeFigures[] = [];
const tpsBefore = await pgbench();
for (const mode of MODES) {
  if (mode !== 'inproc' && mode !== 'http') throw new Error(`BENCH_MODES: unknown mode ${mode}`);
  results.push(await runMode(mode));
}
let bare: Awaited<ReturnType<typeof measureBareTls>> | undefined;
if (MODES.includes('http') && env.BENCH_BARE !== '0') {
  log(`bare Node.js HTTPS server, ${AGENTS} clients holding a request (load ${loadavg()})`);
  const dir = mkdtempSync(join(tmpdir(), 'bc-bench-bare-tls-'));
  try {
    bare = await measureBareTls(AGENTS, dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
const tpsAfter = await pgbench();
const loadAfter = loadavg();

const ms = (values: number[]) => `${fmt(percentile(values, 50))} / ${fmt(percentile(values, 99))}`;
const lines = [
  '',
  `bench/agent-api, ${startedAt.toISOString()} → ${new Date().toISOString()}`,
  `${AGENTS} agents; steady ${RATE} commands/s for ${DURATION_S} s (one per agent in turn); backlog ${BACKLOG} per agent; poll limit ${POLL_LIMIT}, wait ${WAIT_MS} ms; first polls spread over ${START_SPREAD_MS / 1000} s; server log level ${SERVER_LOG_LEVEL}`,
  `load average before ${loadBefore}, after ${loadAfter}; pgbench insert TPS (1 / 2 clients) before ${tpsBefore.map((t) => fmt(t, 0)).join(' / ')}, after ${tpsAfter.map((t) => fmt(t, 0)).join(' / ')}`,
  '',
  '| mode | setup s | steady received / sent | enqueue→received p50 / p99 ms (from COMMIT) | from enqueue start | COMMIT→completed | driver late max ms | steady CPU (cores: server, agents; machine %) | throughput commands/s | completed / queued | enqueue s | throughput CPU | errors |',
  '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
];
const cpuText = (cpu: Steady['cpu']) =>
  `${Object.entries(cpu.cores)
    .map(([name, cores]) => `${name} ${fmt(cores, 2)}`)
    .join(', ')}; ${fmt(cpu.machine * 100, 0)} %`;
for (const r of results) {
  lines.push(
    `| ${r.mode} | ${fmt(r.setupS)} | ${r.steady.received} / ${r.steady.sent} | ${ms(r.steady.fromCommit)} | ${ms(r.steady.fromStart)} | ${ms(r.steady.toCompleted)} | ${fmt(r.steady.maxLateMs)} | ${cpuText(r.steady.cpu)} | ${fmt(r.throughput.completed / r.throughput.seconds, 0)} | ${r.throughput.completed} / ${r.throughput.commands} | ${fmt(r.throughput.enqueueSeconds)} | ${cpuText(r.throughput.cpu)} | ${r.errors}${r.lastError ? ` (${r.lastError})` : ''} |`,
  );
}
for (const r of results) {
  if (!r.memory) continue;
  const { none, connected, after, polling } = r.memory;
  const per = (a: MemorySample, b: MemorySample, field: keyof MemorySample) => fmt((a[field] - b[field]) / AGENTS, 1);
  lines.push(
    '',
    `server memory (${r.mode}): none connected RSS ${fmt(none.rssKb / 1024)} MiB, heap ${fmt(none.heapUsedKb / 1024)} MiB; ${AGENTS} connected (${polling} polls held) RSS ${fmt(connected.rssKb / 1024)} MiB, heap ${fmt(connected.heapUsedKb / 1024)} MiB; after they left RSS ${fmt(after.rssKb / 1024)} MiB, heap ${fmt(after.heapUsedKb / 1024)} MiB`,
    `per connected agent: RSS ${per(connected, none, 'rssKb')} KB, heap ${per(connected, none, 'heapUsedKb')} KB, outside the heap ${per(connected, none, 'externalKb')} KB (over none connected); RSS ${per(connected, after, 'rssKb')} KB, heap ${per(connected, after, 'heapUsedKb')} KB (over after they left)`,
  );
}
if (bare) {
  const { none, connected, held } = bare;
  lines.push(
    `bare Node.js HTTPS server (client certificates requested from its CA, each request held; the reference): none connected RSS ${fmt(none.rssKb / 1024)} MiB, heap ${fmt(none.heapUsedKb / 1024)} MiB; ${AGENTS} connected (${held} requests held) RSS ${fmt(connected.rssKb / 1024)} MiB, heap ${fmt(connected.heapUsedKb / 1024)} MiB`,
    `per connected client: RSS ${fmt((connected.rssKb - none.rssKb) / AGENTS)} KB, heap ${fmt((connected.heapUsedKb - none.heapUsedKb) / AGENTS)} KB`,
  );
}
for (const r of results) {
  if (r.steady.server) lines.push(`server during the steady phase (${r.mode}): ${r.steady.server}`);
}
for (const r of results) {
  lines.push(
    `clocks (${r.mode}): the agents' stamps moved by ${fmt(r.steady.shift, 3)} ms onto the driver's (the difference of the two processes' Date.now() − performance.timeOrigin − performance.now())`,
  );
}
console.log(lines.join('\n'));
