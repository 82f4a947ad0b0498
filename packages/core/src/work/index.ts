export { DEFAULT_BACKOFF, failureDelayMs, TRANSIENT_BACKOFF_MAX_MS } from './backoff';
export { FencedExecutor, isFencedError, type ShardLease } from './fenced-executor';
export { runDueWork } from './run-due-work';
export { shardOf } from './shard';
export {
  parseWorkNotification,
  type ReconcileResult,
  URGENT_LEAD_MS,
  WORK_CHANNEL,
  type WorkItemReport,
  type WorkOutcome,
  type WorkQueue,
  type WorkRequest,
} from './types';
export { createWorkQueue, type WorkQueueOptions } from './work-queue';
export { startWorker, type WorkerHandle } from './worker';
export type { WorkerOptions } from './worker-options';
