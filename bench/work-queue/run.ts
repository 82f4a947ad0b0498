// bench/work-queue: items per second through the work queue with 1, 2 and 4 workers on the local PostgreSQL, and the
// enqueue→start latency, beside pgbench's single-row-insert TPS and Graphile Worker's no-op jobs per second, measured
// in the same run on the same server. Usage: pnpm --filter @better-compute/bench work-queue [items]
import type { ModuleContext, Reconciler, SqlExecutor } from '@better-compute/core';
import {
  applyMigrations,
  coreMigrationsFolder,
  createWorkQueue,
  readMigrationFolder,
  startWorker,
  systemClock,
} from '@better-compute/core/kernel';
import { createPostgresDatabase } from '@better-compute/core/postgres';
import { graphileJobsPerSecond } from '../support/graphile';
import { pgbenchInsertTps } from '../support/pgbench';
import { createBenchDatabase } from '../support/scratch-database';
import { fmt, percentile } from '../support/stats';

const baseUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const items = Number(process.argv[2] ?? 5000);
const SHARDS = 64;

function contextFor(sql: SqlExecutor): ModuleContext {
  // The no-op reconciler reads nothing from its context.
  return { sql } as unknown as ModuleContext;
}

async function migrated(url: string) {
  const db = createPostgresDatabase({ url, max: 4 });
  await applyMigrations(
    db,
    [{ module: 'core', migrations: await readMigrationFolder(coreMigrationsFolder) }],
    systemClock,
  );
  return db;
}

async function throughput(workers: number): Promise<number> {
  const scratch = await createBenchDatabase(baseUrl);
  const db = await migrated(scratch.url);
  const queue = createWorkQueue({ clock: systemClock, shards: SHARDS });
  for (let i = 0; i < items; i += 500) {
    await db.transaction(async (tx) => {
      for (let j = i; j < Math.min(items, i + 500); j += 1) await queue.enqueue(tx, { kind: 'noop', key: `k${j}` });
    });
  }
  let handled = 0;
  let finish: () => void = () => undefined;
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const noop: Reconciler = async () => {
    handled += 1;
    if (handled === items) finish();
    return undefined;
  };
  const reconcilers = new Map([['noop', noop]]);
  const handles = Array.from({ length: workers }, () => createPostgresDatabase({ url: scratch.url, max: 4 }));
  const started = performance.now();
  const running = await Promise.all(
    handles.map((handle, i) =>
      startWorker({
        db: handle,
        clock: systemClock,
        shards: SHARDS,
        reconcilers,
        makeContext: contextFor,
        workerId: `bench-${i}`,
        concurrency: 16,
        pollMs: 50,
        leaseMs: 10_000,
        heartbeatMs: 1_000,
      }),
    ),
  );
  await done;
  const seconds = (performance.now() - started) / 1000;
  await Promise.all(running.map((w) => w.stop()));
  await Promise.all(handles.map((h) => h.close()));
  await db.close();
  await scratch.drop();
  return items / seconds;
}

async function latency(samples: number): Promise<{ p50: number; p99: number }> {
  const scratch = await createBenchDatabase(baseUrl);
  const db = await migrated(scratch.url);
  const queue = createWorkQueue({ clock: systemClock, shards: SHARDS });
  const enqueuedAt = new Map<string, number>();
  const waits: number[] = [];
  const reconcilers = new Map<string, Reconciler>([
    [
      'probe',
      async (key) => {
        const at = enqueuedAt.get(key);
        if (at !== undefined) waits.push(performance.now() - at);
        return undefined;
      },
    ],
  ]);
  const handle = createPostgresDatabase({ url: scratch.url, max: 4 });
  const worker = await startWorker({
    db: handle,
    clock: systemClock,
    shards: SHARDS,
    reconcilers,
    makeContext: contextFor,
    workerId: 'bench-latency',
    pollMs: 1000,
  });
  await new Promise((resolve) => setTimeout(resolve, 500)); // let it take its shards
  for (let i = 0; i < samples; i += 1) {
    const key = `p${i}`;
    await db.transaction(async (tx) => {
      await queue.enqueue(tx, { kind: 'probe', key });
      enqueuedAt.set(key, performance.now());
    });
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  await new Promise((resolve) => setTimeout(resolve, 500));
  await worker.stop();
  await handle.close();
  await db.close();
  await scratch.drop();
  return { p50: percentile(waits, 50), p99: percentile(waits, 99) };
}

async function graphile(workers: number): Promise<number> {
  const scratch = await createBenchDatabase(baseUrl);
  try {
    return await graphileJobsPerSecond(scratch.url, items, workers);
  } finally {
    await scratch.drop();
  }
}

async function pgbench(clients: number): Promise<number> {
  const scratch = await createBenchDatabase(baseUrl);
  try {
    return await pgbenchInsertTps(scratch.url, clients, 5);
  } finally {
    await scratch.drop();
  }
}

const rows: string[] = [];
for (const workers of [1, 2, 4]) {
  const ours = await throughput(workers);
  const tps = await pgbench(workers);
  const gw = await graphile(workers);
  rows.push(
    `| ${workers} | ${fmt(ours, 0)} | ${fmt(tps, 0)} | ${fmt(ours / tps, 2)} | ${fmt(gw, 0)} | ${fmt(ours / gw, 2)} |`,
  );
}
const { p50, p99 } = await latency(200);
console.log(`work queue: ${items} no-op items per run, ${SHARDS} shards, server ${new URL(baseUrl).host}\n`);
console.log('| workers | items/s | pgbench insert TPS | ratio | Graphile jobs/s | ratio |');
console.log('| --- | --- | --- | --- | --- | --- |');
for (const row of rows) console.log(row);
console.log(`\nenqueue→start latency, 1 worker, 200 samples: p50 ${fmt(p50, 2)} ms, p99 ${fmt(p99, 2)} ms`);
