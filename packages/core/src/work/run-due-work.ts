import type { Clock } from '../clock';
import { ComputeError } from '../errors';
import { type Logger, silentLogger } from '../kernel/logger';
import type { ModuleContext } from '../kernel/module';
import type { SqlExecutor } from '../sql/executor';
import { resolveBackoff } from './backoff';
import { claimDueItems } from './items';
import { ClaimPreloads } from './preloads';
import { processItem } from './process-item';
import type { BackoffOptions, Reconciler, WorkItemReport } from './types';

/** Options of {@link runDueWork}. */
export interface RunDueWorkOptions {
  db: SqlExecutor;
  clock: Clock;
  reconcilers: ReadonlyMap<string, Reconciler>;
  /** Builds the context a reconciler gets; `sql` is `db` itself (no leases, so no fencing). */
  makeContext: (sql: SqlExecutor) => ModuleContext;
  /** Only items of these shard numbers; every shard when omitted. */
  shards?: readonly number[];
  /** At most this many items in this pass. Default 1,000. */
  limit?: number;
  backoff?: BackoffOptions;
  log?: Logger;
  /** Called after each item with how it ended. */
  onItem?: (report: WorkItemReport) => void;
}

// One per set of reconcilers, so preloads turned off after a failing claim stay off across passes.
const preloadsByReconcilers = new WeakMap<ReadonlyMap<string, Reconciler>, ClaimPreloads>();

function preloadsFor(reconcilers: ReadonlyMap<string, Reconciler>, log: Logger): ClaimPreloads {
  let preloads = preloadsByReconcilers.get(reconcilers);
  if (!preloads) {
    preloads = new ClaimPreloads(reconcilers, log);
    preloadsByReconcilers.set(reconcilers, preloads);
  }
  return preloads;
}

/**
 * One pass without leases: claims every item due at the Clock's now (due first, up to `limit`) and runs each once,
 * one after another, recording results exactly as a worker does (delete, requeue, backoff). Items that become due
 * during the pass wait for the next one. For single-process drivers such as the testkit's `settle()`; do not run it
 * beside workers on the same database.
 *
 * @returns the number of items handled.
 * @example
 * ```ts
 * while ((await runDueWork({ db, clock, reconcilers, makeContext })) > 0) {}
 * ```
 */
export async function runDueWork(options: RunDueWorkOptions): Promise<number> {
  const limit = options.limit ?? 1_000;
  if (!Number.isInteger(limit) || limit < 1) {
    throw new ComputeError('INVALID_CONFIG', 'limit must be a positive integer', { details: { path: ['limit'] } });
  }
  const backoff = resolveBackoff(options.backoff);
  const log = options.log ?? silentLogger;
  const filter = {
    claimant: 'run-due-work',
    now: options.clock.now(),
    limit,
    distinctKeys: false,
    ...(options.shards ? { shards: options.shards } : {}),
  };
  const { items } = await preloadsFor(options.reconcilers, log).claim(async (preload) => ({
    items: await claimDueItems(options.db, { ...filter, ...preload }),
    nextDueAt: undefined,
  }));
  for (const item of items) {
    const report = await processItem({ ...options, item, sql: options.db, backoff, log });
    options.onItem?.(report);
  }
  return items.length;
}
