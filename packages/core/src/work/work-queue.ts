import { requireText } from '../checks/checks';
import type { Clock } from '../clock';
import { ComputeError } from '../errors';
import type { Notification, SqlExecutor } from '../sql/executor';
import { sendNotifications } from '../sql/notifications';
import { assertShardCount, DEFAULT_SHARDS, shardOf } from './shard';
import { URGENT_SUFFIX, WORK_CHANNEL, type WorkQueue, type WorkRequest } from './types';

/** Options of {@link createWorkQueue}. */
export interface WorkQueueOptions {
  /** The clock `notBefore` defaults from. */
  clock: Clock;
  /** The shard count; the same in every process of a deployment. Default 64. */
  shards?: number;
  /** The work kinds a reconciler is registered for; given, the queue has `handles(kind)`. */
  kinds?: Iterable<string>;
}

/**
 * The upsert of work items: `rows` (a VALUES list or a SELECT) yields `(kind, key, shard, not_before, urgent, now)`.
 * It keeps the earliest not_before (and, for an item being processed, the earliest asked since its claim), bumps seq,
 * so a finishing worker sees it, and unparks the item (a wake is work its park must not hide). Returns each item's
 * shard.
 */
function upsertWorkSql(rows: string): string {
  return `INSERT INTO work_items AS w (kind, key, shard, not_before, urgent, created_at, seq, attempts, updated_at)
  SELECT r.kind, r.key, r.shard, r.not_before, r.urgent, r.now, 1, 0, r.now
  FROM (${rows}) AS r (kind, key, shard, not_before, urgent, now)
  ON CONFLICT (kind, key) DO UPDATE SET
    not_before = LEAST(w.not_before, EXCLUDED.not_before),
    enqueued_not_before = LEAST(w.enqueued_not_before, EXCLUDED.not_before),
    urgent = w.urgent OR EXCLUDED.urgent,
    park_on = NULL,
    seq = w.seq + 1,
    updated_at = EXCLUDED.updated_at
  RETURNING w.shard`;
}

// The notification payload of the shard each upserted row returns, as parseWorkNotification reads it: `urgent` is an
// SQL boolean expression.
const shardPayloadSql = (urgent: string) => `shard::text || CASE WHEN ${urgent} THEN '${URGENT_SUFFIX}' ELSE '' END`;

// The payloads a wake's CTE `name` upserted, selected once as an array (NULL when it upserted nothing).
const payloadsOf = (name: string, urgent: string) => `(SELECT array_agg(${shardPayloadSql(urgent)}) FROM ${name})`;

/**
 * The notifications on the work channel for the payloads a statement selected from a wake's `payloads` expression
 * (an array, NULL when the wake queued nothing), each once: for the caller to send with `sendNotifications` once the
 * statement is committed.
 *
 * @example
 * ```ts
 * await sendNotifications(tx, workNotifications(rows[0]?.woken));
 * ```
 */
export function workNotifications(payloads: unknown): Notification[] {
  if (!Array.isArray(payloads)) return [];
  const unique = new Set(payloads.filter((p): p is string => typeof p === 'string' && p.length > 0));
  return [...unique].map((payload) => ({ channel: WORK_CHANNEL, payload }));
}

/**
 * The SQL expression that sends, in the statement itself (delivered at its commit), the work notifications whose
 * payloads `payloads` (a wake's `payloads` expression) selects; counts them. For the statements an agent's own call
 * commits (a command's result, a session's open): their wake must not wait for the calling process to get the CPU
 * back after its commit. Everything else sends after its commit (see `sendNotifications` for why).
 *
 * @example
 * ```ts
 * const text = `WITH moved AS (UPDATE …) ${wake.cte} SELECT moved.*, ${notifyInStatementSql(wake.payloads)} AS woken FROM moved`;
 * ```
 */
export function notifyInStatementSql(payloads: string): string {
  return `(SELECT count(pg_notify('${WORK_CHANNEL}', p)) FROM unnest(${payloads}) AS p)`;
}

// One statement: the upsert, returning the notification payload for the shard's owner (saying so when the wake is
// urgent, so a busy worker claims at once). It is sent after commit, so a worker is never woken for work it cannot see.
const ENQUEUE_SQL = `
WITH upserted AS (${upsertWorkSql('VALUES ($1::text, $2::text, $3::int, $4::timestamptz, $6::boolean, $5::timestamptz)')})
SELECT ${shardPayloadSql('$6')} AS payload FROM upserted`;

// The shard count of each work queue createWorkQueue made: a statement that queues a wake itself needs it.
const shardCounts = new WeakMap<WorkQueue, number>();

/**
 * For a statement that queues the urgent wake of the rows it changed, as {@link WorkQueue.enqueue} would, in the same
 * statement: the CTE to append (named `name`) and the expression of its notifications' payloads, to select once: sent
 * after the commit ({@link workNotifications}) or by the statement itself ({@link notifyInStatementSql}).
 * `rows` selects `(kind, key)` pairs (rows with a NULL kind are skipped); `nowParam` is the placeholder of now, and
 * the shard count is pushed onto `params`. Undefined for a work queue not made by {@link createWorkQueue} (the
 * testkit's): the caller then calls `enqueue`.
 *
 * @example
 * ```ts
 * const wake = urgentWakeSql(work, 'woken', 'SELECT m.wake_kind, m.wake_key FROM moved m', '$3', params);
 * const sql = wake && `WITH moved AS (UPDATE …) ${wake.cte} SELECT m.*, ${wake.payloads} AS woken FROM moved m`;
 * ```
 */
export function urgentWakeSql(
  work: WorkQueue,
  name: string,
  rows: string,
  nowParam: string,
  params: unknown[],
): { cte: string; payloads: string } | undefined {
  const shards = shardCounts.get(work);
  if (shards === undefined) return undefined;
  params.push(shards);
  const shard = `work_shard_of(s.key, $${params.length}::int)`;
  const source = `SELECT s.kind, s.key, ${shard}, ${nowParam}::timestamptz, true, ${nowParam}::timestamptz
    FROM (${rows}) AS s (kind, key) WHERE s.kind IS NOT NULL`;
  return { cte: `, ${name} AS (${upsertWorkSql(source)})`, payloads: payloadsOf(name, 'true') };
}

/**
 * For a statement that queues urgent wakes due now whose shard count it reads itself (from a table, not from a work
 * queue): the CTE to append (named `name`) and the expression of its notifications' payloads, to select once. `rows`
 * selects `(kind, key, shards)` triples; `nowParam` is the placeholder of now. Used by `openAgentSession`, which has
 * only its transaction.
 *
 * @example
 * ```ts
 * const wake = shardedWakeSql('woken', 'SELECT k.kind, $1::text, k.shards FROM agent_session_wakes k', '$2');
 * await tx.query(`WITH opened AS (INSERT …) ${wake.cte} SELECT ${wake.payloads} AS woken`, [nodeId, now]);
 * ```
 */
export function shardedWakeSql(name: string, rows: string, nowParam: string): { cte: string; payloads: string } {
  const source = `SELECT s.kind, s.key, work_shard_of(s.key, s.shards), ${nowParam}::timestamptz, true,
    ${nowParam}::timestamptz FROM (${rows}) AS s (kind, key, shards)`;
  return { cte: `, ${name} AS (${upsertWorkSql(source)})`, payloads: payloadsOf(name, 'true') };
}

/**
 * Whether {@link workEnqueueSql} can build a wake for this work queue (one made by {@link createWorkQueue}).
 *
 * @example
 * ```ts
 * if (!canWriteWake(ctx.work)) await db.transaction((tx) => ctx.work.enqueue(tx, request));
 * ```
 */
export function canWriteWake(work: WorkQueue): boolean {
  return shardCounts.has(work);
}

/**
 * For a statement that queues one work item as {@link WorkQueue.enqueue} would (`notBefore` now unless given), in the
 * same statement and only when `condition` holds: the body of a data-modifying CTE and the expression of its
 * notification's payload, to select once from the CTE named `name` and send after commit. Parameters go through `bind`; `now` is the placeholder of
 * now (a timestamptz). Checks the request as `enqueue` does. Undefined for a work queue not made by
 * {@link createWorkQueue} (the testkit's): the caller then calls `enqueue` in a transaction.
 *
 * @example
 * ```ts
 * const wake = workEnqueueSql(work, { kind: 'metal', key: nodeId }, { bind, now: '$2', condition: 'EXISTS (SELECT 1 FROM wf)', name: 'woken' }, clock.now());
 * const text = wake && `WITH wf AS (UPDATE …), woken AS (${wake.cte}) SELECT ${wake.payloads} AS woken`;
 * ```
 */
export function workEnqueueSql(
  work: WorkQueue,
  request: WorkRequest,
  sql: { bind: (value: unknown) => string; now: string; condition: string; name: string },
  now: Date,
): { cte: string; payloads: string } | undefined {
  const shards = shardCounts.get(work);
  if (shards === undefined) return undefined;
  const { kind, key, notBefore, urgent } = checkWorkRequest(request, now);
  const { bind } = sql;
  const due = request.notBefore === undefined ? sql.now : `${bind(notBefore)}::timestamptz`;
  const flag = `${bind(urgent)}::boolean`;
  const source = `SELECT ${bind(kind)}::text, ${bind(key)}::text, ${bind(shardOf(key, shards))}::int, ${due}, ${flag},
    ${sql.now} WHERE ${sql.condition}`;
  return { cte: upsertWorkSql(source), payloads: payloadsOf(sql.name, flag) };
}

const MAX_TEXT = 512;

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
 * Checks a work request as every work queue must (INVALID_INPUT naming the field): a kind and a key of 1 to 512
 * characters PostgreSQL can store, `notBefore` a valid Date (`now` when omitted), `urgent` a boolean (false when
 * omitted). The kernel's queue and the testkit's in-memory one share it, so they refuse alike.
 *
 * @example
 * ```ts
 * const { kind, key, notBefore, urgent } = checkWorkRequest({ kind: 'workflow', key: nodeId }, clock.now());
 * ```
 */
export function checkWorkRequest(
  request: unknown,
  now: Date,
): { kind: string; key: string; notBefore: Date; urgent: boolean } {
  if (typeof request !== 'object' || request === null) {
    throw new ComputeError('INVALID_INPUT', 'a work request must be an object', { details: { path: [] } });
  }
  const { kind, key, notBefore, urgent } = request as Partial<Record<keyof WorkRequest, unknown>>;
  return {
    kind: requireText(kind, ['kind'], { max: MAX_TEXT, name: 'work kind' }),
    key: requireText(key, ['key'], { max: MAX_TEXT, name: 'work key' }),
    notBefore: notBefore === undefined ? now : requireDate(notBefore),
    urgent: requireUrgent(urgent),
  };
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
  const queue: WorkQueue = {
    async enqueue(tx: SqlExecutor, request: WorkRequest): Promise<void> {
      const now = clock.now();
      const { kind, key, notBefore, urgent } = checkWorkRequest(request, now);
      const { rows } = await tx.query<{ payload: string }>(ENQUEUE_SQL, [
        kind,
        key,
        shardOf(key, shards),
        notBefore,
        now,
        urgent,
      ]);
      await sendNotifications(tx, workNotifications(rows.map((row) => row.payload)));
    },
  };
  if (options.kinds !== undefined) {
    const kinds = new Set(options.kinds);
    queue.handles = (kind) => kinds.has(kind);
  }
  shardCounts.set(queue, shards);
  return queue;
}
