import type { SqlExecutor } from '@better-compute/core';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/** The server's Prometheus metrics. Database-derived gauges are cluster-wide: every process reports the same figure. */
export interface ServerMetrics {
  readonly registry: Registry;
  /** One HTTP request answered: its route (a known path, never a raw unknown one), method, status and duration. */
  observeRequest(route: string, method: string, code: number, seconds: number): void;
  /** The worker ids of this process, whose shard leases `better_compute_leases_held` counts. */
  setWorkerIds(ids: readonly string[]): void;
  /** Refreshes the database-derived figures, then renders the exposition text. */
  render(): Promise<string>;
}

const PREFIX = 'better_compute_';
const STEP_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 1800, 3600, 7200];

/**
 * The metrics of the list, read from the database at scrape time (workflows by state, work-queue depth and
 * oldest due age by kind, commands by state, connected agents by role, the leases this process's workers hold) or
 * observed here (HTTP request durations; step durations, from the steps that finished since the previous scrape), plus
 * prom-client's process metrics.
 *
 * @example
 * ```ts
 * const metrics = createMetrics(compute.database);
 * app.get('/metrics', async (c) => c.text(await metrics.render()));
 * ```
 */
export function createMetrics(db: SqlExecutor): ServerMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: PREFIX });
  const workflows = new Gauge({
    name: `${PREFIX}workflows`,
    help: 'Workflows by state.',
    labelNames: ['state'],
    registers: [registry],
  });
  const stepDuration = new Histogram({
    name: `${PREFIX}step_duration_seconds`,
    help: 'Durations of finished workflow steps (first start to finish) by action, observed at scrape time.',
    labelNames: ['action', 'state'],
    buckets: STEP_BUCKETS,
    registers: [registry],
  });
  const queueDepth = new Gauge({
    name: `${PREFIX}work_queue_depth`,
    help: 'Work items by kind (due or not).',
    labelNames: ['kind'],
    registers: [registry],
  });
  const oldestDue = new Gauge({
    name: `${PREFIX}work_queue_oldest_due_age_seconds`,
    help: 'How long the oldest due work item of each kind has been due.',
    labelNames: ['kind'],
    registers: [registry],
  });
  const commands = new Gauge({
    name: `${PREFIX}commands`,
    help: 'Commands by state.',
    labelNames: ['state'],
    registers: [registry],
  });
  const agents = new Gauge({
    name: `${PREFIX}agents_connected`,
    help: 'Open agent sessions by role.',
    labelNames: ['role'],
    registers: [registry],
  });
  const leases = new Gauge({
    name: `${PREFIX}leases_held`,
    help: "Unexpired shard leases held by this process's workers.",
    registers: [registry],
  });
  const httpDuration = new Histogram({
    name: `${PREFIX}http_request_duration_seconds`,
    help: 'HTTP request durations by route, method and status code.',
    labelNames: ['route', 'method', 'code'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const scrapeErrors = new Counter({
    name: `${PREFIX}metrics_scrape_errors_total`,
    help: 'Scrapes whose database read failed (the database-derived figures kept their previous values).',
    registers: [registry],
  });

  let workerIds: string[] = [];
  // Steps that finished after this instant are observed at the next scrape; the first scrape starts from the start.
  let stepsSince = new Date();

  async function refresh(): Promise<void> {
    const now = new Date();
    const [wf, work, cmd, sessions, held, steps] = await Promise.all([
      db.query<{ state: string; n: string }>('SELECT state, count(*) AS n FROM workflows GROUP BY state'),
      db.query<{ kind: string; n: string; age: string | null }>(
        `SELECT kind, count(*) AS n,
                EXTRACT(EPOCH FROM ($1::timestamptz - min(not_before) FILTER (WHERE not_before <= $1::timestamptz))) AS age
         FROM work_items GROUP BY kind`,
        [now],
      ),
      db.query<{ state: string; n: string }>('SELECT state, count(*) AS n FROM commands GROUP BY state'),
      db.query<{ role: string; n: string }>(
        'SELECT role, count(*) AS n FROM agent_sessions WHERE closed_at IS NULL GROUP BY role',
      ),
      db.query<{ n: string }>(
        'SELECT count(*) AS n FROM shard_leases WHERE worker_id = ANY($1::text[]) AND expires_at > $2',
        [workerIds, now],
      ),
      db.query<{ action: string; state: string; seconds: string; finished_at: Date }>(
        `SELECT action, state, finished_at,
                EXTRACT(EPOCH FROM (finished_at - COALESCE(first_started_at, started_at))) AS seconds
         FROM workflow_steps
         WHERE finished_at > $1 AND finished_at <= $2 AND COALESCE(first_started_at, started_at) IS NOT NULL
         ORDER BY finished_at LIMIT 10000`,
        [stepsSince, now],
      ),
    ]);
    workflows.reset();
    for (const row of wf.rows) workflows.set({ state: row.state }, Number(row.n));
    queueDepth.reset();
    oldestDue.reset();
    for (const row of work.rows) {
      queueDepth.set({ kind: row.kind }, Number(row.n));
      oldestDue.set({ kind: row.kind }, row.age === null ? 0 : Math.max(0, Number(row.age)));
    }
    commands.reset();
    for (const row of cmd.rows) commands.set({ state: row.state }, Number(row.n));
    agents.reset();
    for (const row of sessions.rows) agents.set({ role: row.role }, Number(row.n));
    leases.set(Number(held.rows[0]?.n ?? 0));
    for (const row of steps.rows) stepDuration.observe({ action: row.action, state: row.state }, Number(row.seconds));
    const last = steps.rows.at(-1);
    stepsSince = steps.rows.length === 10000 && last ? last.finished_at : now;
  }

  return {
    registry,
    observeRequest(route, method, code, seconds) {
      httpDuration.observe({ route, method, code: String(code) }, seconds);
    },
    setWorkerIds(ids) {
      workerIds = [...ids];
    },
    async render() {
      try {
        await refresh();
      } catch {
        scrapeErrors.inc();
      }
      return registry.metrics();
    },
  };
}
