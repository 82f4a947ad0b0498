import { addMs, type Clock } from '../clock';
import { ComputeError } from '../errors';
import type { Logger } from '../kernel/logger';
import type { ModuleContext } from '../kernel/module';
import type { SqlExecutor } from '../sql/executor';
import { describeFailure, failureDelayMs } from './backoff';
import { isFencedError, type ShardLease } from './fenced-executor';
import { type BatchOutcome, finishItem } from './finish';
import type { ClaimedItem } from './items';
import { type CheckedPark, checkPark } from './park';
import type { BackoffOptions, Reconciler, WorkItemReport, WorkOutcome } from './types';

/** What running one claimed item needs. */
export interface ProcessItemInput {
  item: ClaimedItem;
  reconcilers: ReadonlyMap<string, Reconciler>;
  /** Where the result is recorded. */
  db: SqlExecutor;
  /** The executor the reconciler gets as `ctx.sql`, fenced in a worker. */
  sql: SqlExecutor;
  /**
   * The lease the item is processed under (a worker): the reconciler gets it as `ctx.lease`, and recording the result
   * is fenced by it.
   */
  lease?: ShardLease;
  /**
   * Records `done` and `requeued` instead of {@link finishItem} (a worker batches them); answers whether the item was
   * fenced.
   */
  recordFinish?: (item: ClaimedItem, finish: DoneOrRequeued, now: Date) => Promise<BatchOutcome>;
  makeContext: (sql: SqlExecutor) => ModuleContext;
  clock: Clock;
  backoff: Required<BackoffOptions>;
  log: Logger;
  /** Aborted when the worker stops; reconcilers see it as `ctx.signal`. */
  signal?: AbortSignal;
}

/** A pass that did not fail: what {@link ProcessItemInput.recordFinish} records. */
export type DoneOrRequeued = { outcome: 'done' } | { outcome: 'requeued'; delayMs: number; park?: CheckedPark };

// `written`: the reconciler wrote its requeue (`commit` with `requeue`) or deleted its done item (`done`) itself, so
// nothing is left to record.
type Result =
  | DoneOrRequeued
  | { outcome: 'requeued'; delayMs: number; written: true }
  | { outcome: 'done'; written: true }
  | { outcome: 'failed'; error: unknown };

function checkResult(value: unknown, parks: boolean): Result {
  if (value === undefined || value === null) return { outcome: 'done' };
  if ((value as { doneWritten?: unknown }).doneWritten === true) return { outcome: 'done', written: true };
  const {
    requeueAfterMs: delay,
    requeueWritten,
    park,
  } = value as { requeueAfterMs?: unknown; requeueWritten?: unknown; park?: unknown };
  if (typeof value === 'object' && typeof delay === 'number' && Number.isFinite(delay) && delay >= 0) {
    if (requeueWritten === true) return { outcome: 'requeued', delayMs: delay, written: true };
    // A kind without a park SQL has nobody to look: its passes run as plain requeues.
    if (park === undefined || !parks) return { outcome: 'requeued', delayMs: delay };
    const checked = checkPark(park, delay);
    if (checked instanceof ComputeError) return { outcome: 'failed', error: checked };
    return { outcome: 'requeued', delayMs: delay, park: checked };
  }
  const error = new ComputeError(
    'INVALID_STATE',
    'a reconciler must return nothing or { requeueAfterMs: number >= 0 }',
    {
      details: { path: ['requeueAfterMs'] },
    },
  );
  return { outcome: 'failed', error };
}

async function reconcile(input: ProcessItemInput): Promise<Result> {
  const { item } = input;
  const reconciler = input.reconcilers.get(item.kind);
  if (!reconciler) {
    const error = new ComputeError('INVALID_CONFIG', `no reconciler is registered for work kind '${item.kind}'`, {
      details: { path: ['kind'], kind: item.kind },
    });
    return { outcome: 'failed', error };
  }
  try {
    const ctx = {
      ...input.makeContext(input.sql),
      ...(input.signal ? { signal: input.signal } : {}),
      ...('preloaded' in item ? { preloaded: item.preloaded } : {}),
      item: { kind: item.kind, key: item.key, seq: item.seq },
      ...(input.lease ? { lease: input.lease } : {}),
    };
    return checkResult(await reconciler(item.key, ctx), typeof reconciler.park?.sql === 'function');
  } catch (error) {
    return { outcome: 'failed', error };
  }
}

/**
 * Runs the reconciler of one claimed item and records the result, fenced by `lease` when given (so a worker's
 * completion is fenced like the reconciler's writes). Never throws for what the reconciler did; a failure to record
 * the result (the database went away) does throw, and leaves the item to be claimed again.
 *
 * @example
 * ```ts
 * const report = await processItem({ item, reconcilers, db, sql: db, makeContext, clock, backoff: DEFAULT_BACKOFF, log });
 * ```
 */
export async function processItem(input: ProcessItemInput): Promise<WorkItemReport> {
  const { item, clock, log } = input;
  const startedAt = clock.now();
  const result = await reconcile(input);
  const report = (outcome: WorkOutcome, attempts: number, requeueAt?: Date): WorkItemReport => ({
    kind: item.kind,
    key: item.key,
    shard: item.shard,
    outcome,
    attempts,
    dueAt: item.notBefore,
    startedAt,
    finishedAt: clock.now(),
    ...(requeueAt ? { requeueAt } : {}),
  });
  // A fenced reconciler is recorded like any failure: recording is fenced too, and turns into 'fenced' if the lease is
  // really gone, while a stray fencing error under a held lease still gets its backoff.
  const now = clock.now();
  try {
    // Recorded already, by the reconciler's own statement (fenced as the worker's record would have been).
    if ('written' in result) {
      return result.outcome === 'done' ? report('done', 0) : report('requeued', 0, addMs(now, result.delayMs));
    }
    if (result.outcome === 'failed') {
      const attempts = item.attempts + 1;
      const delayMs = failureDelayMs(attempts, result.error, input.backoff);
      const error = describeFailure(result.error);
      await finishItem(input.db, item, { outcome: 'failed', delayMs, error }, now, input.lease);
      log.error('reconciler failed', { kind: item.kind, key: item.key, attempts, retryInMs: delayMs, error });
      return report('failed', attempts, addMs(now, delayMs));
    }
    if (input.recordFinish) {
      if ((await input.recordFinish(item, result, now)) === 'fenced') return report('fenced', item.attempts);
    } else {
      await finishItem(input.db, item, result, now, input.lease);
    }
    return report(result.outcome, 0, result.outcome === 'requeued' ? addMs(now, result.delayMs) : undefined);
  } catch (err) {
    if (isFencedError(err)) return report('fenced', item.attempts);
    throw err;
  }
}
