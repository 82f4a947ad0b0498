import { type Clock, systemClock } from '../clock';
import { ComputeError } from '../errors';
import { newId } from '../ids';
import { type Logger, silentLogger } from '../kernel/logger';
import type { ModuleContext } from '../kernel/module';
import type { SqlDatabase, SqlExecutor } from '../sql/executor';
import { resolveBackoff } from './backoff';
import { assertShardCount, DEFAULT_SHARDS } from './shard';
import type { BackoffOptions, Reconciler, WorkItemReport } from './types';

/**
 * The worker defaults: 8 items at once, 15 s leases renewed every 5 s, a 1 s polling floor.
 *
 * @example
 * ```ts
 * startWorker({ ...options, leaseMs: WORKER_DEFAULTS.leaseMs * 2 });
 * ```
 */
export const WORKER_DEFAULTS = Object.freeze({ concurrency: 8, leaseMs: 15_000, heartbeatMs: 5_000, pollMs: 1_000 });

/** Options of {@link startWorker}. */
export interface WorkerOptions {
  /** The database the worker owns connections of; it is not closed by `stop()`. */
  db: SqlDatabase;
  /** Where every timestamp comes from. Default the system clock. */
  clock?: Clock;
  /** The shard count; the same as the work queue's and every other worker's. Default 64. */
  shards?: number;
  /** The reconciler of each work kind. */
  reconcilers: ReadonlyMap<string, Reconciler>;
  /** Builds the context a reconciler gets around the fenced `sql` of its item. */
  makeContext: (sql: SqlExecutor) => ModuleContext;
  /** Items processed at once, a quarter of them (rounded down) kept for urgent items. Default 8. */
  concurrency?: number;
  /** How long a lease lasts without renewal; a dead worker's shards pass on after it. Default 15,000 ms. */
  leaseMs?: number;
  /** How often the worker renews its leases and rebalances; under `leaseMs`. Default 5,000 ms. */
  heartbeatMs?: number;
  /** The longest the worker sleeps without looking for due work, notifications or not. Default 1,000 ms. */
  pollMs?: number;
  /** Default `wrk_<ulid>`. Reusing the id of a crashed worker takes its leases over at once. */
  workerId?: string;
  backoff?: BackoffOptions;
  log?: Logger;
  /** Called after each item with how it ended (for metrics and benchmarks). */
  onItem?: (report: WorkItemReport) => void;
}

/** {@link WorkerOptions} checked, with every default filled in. */
export interface ResolvedWorkerOptions extends Required<Omit<WorkerOptions, 'onItem' | 'backoff'>> {
  backoff: Required<BackoffOptions>;
  onItem: ((report: WorkItemReport) => void) | undefined;
}

function positiveInteger(value: unknown, fallback: number, field: string): number {
  const resolved = value ?? fallback;
  if (typeof resolved !== 'number' || !Number.isInteger(resolved) || resolved < 1) {
    throw new ComputeError('INVALID_CONFIG', `${field} must be a positive integer`, { details: { path: [field] } });
  }
  return resolved;
}

/**
 * Checks worker options (INVALID_CONFIG with `details.path` naming the option) and fills in the defaults.
 *
 * @example
 * ```ts
 * const resolved = resolveWorkerOptions({ db, reconcilers, makeContext, leaseMs: 2_000, heartbeatMs: 500 });
 * ```
 */
export function resolveWorkerOptions(options: WorkerOptions): ResolvedWorkerOptions {
  if (!(options.reconcilers instanceof Map)) {
    throw new ComputeError('INVALID_CONFIG', 'reconcilers must be a Map of work kind to reconciler', {
      details: { path: ['reconcilers'] },
    });
  }
  if (typeof options.makeContext !== 'function') {
    throw new ComputeError('INVALID_CONFIG', 'makeContext must be a function', { details: { path: ['makeContext'] } });
  }
  const leaseMs = positiveInteger(options.leaseMs, WORKER_DEFAULTS.leaseMs, 'leaseMs');
  const heartbeatMs = positiveInteger(options.heartbeatMs, WORKER_DEFAULTS.heartbeatMs, 'heartbeatMs');
  if (heartbeatMs >= leaseMs) {
    throw new ComputeError('INVALID_CONFIG', 'heartbeatMs must be shorter than leaseMs', {
      details: { path: ['heartbeatMs'] },
    });
  }
  const workerId = options.workerId ?? newId('wrk');
  if (typeof workerId !== 'string' || workerId.length === 0 || workerId.length > 200) {
    throw new ComputeError('INVALID_CONFIG', 'workerId must be a non-empty string', {
      details: { path: ['workerId'] },
    });
  }
  return {
    db: options.db,
    clock: options.clock ?? systemClock,
    shards: assertShardCount(options.shards ?? DEFAULT_SHARDS),
    reconcilers: options.reconcilers,
    makeContext: options.makeContext,
    concurrency: positiveInteger(options.concurrency, WORKER_DEFAULTS.concurrency, 'concurrency'),
    leaseMs,
    heartbeatMs,
    pollMs: positiveInteger(options.pollMs, WORKER_DEFAULTS.pollMs, 'pollMs'),
    workerId,
    backoff: resolveBackoff(options.backoff),
    log: options.log ?? silentLogger,
    onItem: options.onItem,
  };
}
