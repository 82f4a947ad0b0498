import type { Clock } from '../clock';
import { ComputeError } from '../errors';
import type { SqlExecutor } from '../sql/executor';
import { assertShardCount, DEFAULT_SHARDS, shardOf } from './shard';
import { URGENT_SUFFIX, WORK_CHANNEL, type WorkQueue, type WorkRequest } from './types';

/** Options of {@link createWorkQueue}. */
export interface WorkQueueOptions {
  /** The clock `notBefore` defaults from. */
  clock: Clock;
  /** The shard count; the same in every process of a deployment. Default 64. */
  shards?: number;
}

// One statement: the upsert keeps the earliest not_before (and, for an item being processed, the earliest asked since
// its claim), bumps seq so a finishing worker sees it, and notifies the shard's owner (saying so when the wake is
// urgent, so a busy worker claims at once). The NOTIFY is delivered at commit, so a worker is never woken for work it
// cannot see yet.
const ENQUEUE_SQL = `
WITH upserted AS (
  INSERT INTO work_items AS w (kind, key, shard, not_before, seq, attempts, urgent, created_at, updated_at)
  VALUES ($1, $2, $3, $4, 1, 0, $6, $5, $5)
  ON CONFLICT (kind, key) DO UPDATE SET
    not_before = LEAST(w.not_before, EXCLUDED.not_before),
    enqueued_not_before = LEAST(w.enqueued_not_before, EXCLUDED.not_before),
    urgent = w.urgent OR EXCLUDED.urgent,
    seq = w.seq + 1,
    updated_at = EXCLUDED.updated_at
  RETURNING w.shard
)
SELECT pg_notify('${WORK_CHANNEL}', shard::text || CASE WHEN $6 THEN '${URGENT_SUFFIX}' ELSE '' END) FROM upserted`;

const MAX_TEXT = 512;

function requireText(value: unknown, field: 'kind' | 'key'): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_TEXT) {
    throw new ComputeError(
      'INVALID_INPUT',
      `work ${field} must be a non-empty string of at most ${MAX_TEXT} characters`,
      {
        details: { path: [field] },
      },
    );
  }
  return value;
}

function requireDate(value: unknown): Date {
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) {
    throw new ComputeError('INVALID_INPUT', 'work notBefore must be a valid Date', {
      details: { path: ['notBefore'] },
    });
  }
  return value;
}

function requireUrgent(value: unknown): boolean {
  if (value === undefined) return false;
  if (typeof value !== 'boolean') {
    throw new ComputeError('INVALID_INPUT', 'work urgent must be a boolean', { details: { path: ['urgent'] } });
  }
  return value;
}

/**
 * The work queue. `enqueue(tx, { kind, key, notBefore? })` upserts one row per `(kind, key)`, keeping the earliest
 * `notBefore` (the Clock's now when omitted), in one statement inside the caller's transaction. An enqueue that
 * arrives while the item is being processed is never lost: the item stays due after the reconciler finishes. `urgent`
 * items are claimed ahead of routine ones due up to {@link URGENT_LEAD_MS} before them.
 *
 * @example
 * ```ts
 * const work = createWorkQueue({ clock: systemClock, shards: 64 });
 * await db.transaction(async (tx) => {
 *   await tx.query('UPDATE nodes SET spec = $2 WHERE id = $1', [nodeId, spec]);
 *   await work.enqueue(tx, { kind: 'workflow', key: nodeId });
 * });
 * ```
 */
export function createWorkQueue(options: WorkQueueOptions): WorkQueue {
  const shards = assertShardCount(options.shards ?? DEFAULT_SHARDS);
  const { clock } = options;
  return {
    async enqueue(tx: SqlExecutor, request: WorkRequest): Promise<void> {
      if (typeof request !== 'object' || request === null) {
        throw new ComputeError('INVALID_INPUT', 'a work request must be an object', { details: { path: [] } });
      }
      const kind = requireText(request.kind, 'kind');
      const key = requireText(request.key, 'key');
      const now = clock.now();
      const notBefore = request.notBefore === undefined ? now : requireDate(request.notBefore);
      const urgent = requireUrgent(request.urgent);
      await tx.query(ENQUEUE_SQL, [kind, key, shardOf(key, shards), notBefore, now, urgent]);
    },
  };
}
