export { backoffDelayMs, DEFAULT_BACKOFF, describeFailure, failureDelayMs, TRANSIENT_BACKOFF_MAX_MS } from './backoff';
export {
  assertLeaseHeld,
  FencedExecutor,
  fencedError,
  isFencedError,
  type ShardLease,
} from './fenced-executor';
export { type RunDueWorkOptions, runDueWork } from './run-due-work';
export { assignedShards, DEFAULT_SHARDS, fnv1a32, shardOf } from './shard';
export {
  type BackoffOptions,
  parseWorkNotification,
  REBALANCE_PAYLOAD,
  type ReconcileResult,
  URGENT_LEAD_MS,
  URGENT_SUFFIX,
  WORK_CHANNEL,
  type WorkItemReport,
  type WorkOutcome,
  type WorkQueue,
  type WorkRequest,
} from './types';
export { createWorkQueue, type WorkQueueOptions } from './work-queue';
export { startWorker, type WorkerHandle, type WorkerStats } from './worker';
export { WORKER_DEFAULTS, type WorkerOptions } from './worker-options';
