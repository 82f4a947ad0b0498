import type { ModuleContext } from '../kernel/module';
import type { SqlExecutor } from '../sql/executor';

/** A request to run a reconciler for `(kind, key)`, no earlier than `notBefore` (now when omitted). */
export interface WorkRequest {
  kind: string;
  key: string;
  notBefore?: Date;
  /**
   * Claim it ahead of routine work: once due, an urgent item is ordered as if it had become due
   * {@link URGENT_LEAD_MS} earlier. For wakes that something is waiting on (a command's result, an operator's verb),
   * so a backlog of routine items (a burst of starts, polls) does not delay them; nothing routine waits more than
   * that lead longer than it would have. Sticky until the item is next claimed. Default false.
   */
  urgent?: boolean;
}

/**
 * How far ahead of routine work an urgent item is claimed: it is ordered as if due this much earlier.
 *
 * @example
 * ```ts
 * await ctx.work.enqueue(tx, { kind: 'workflow', key: nodeId, urgent: true }); // ahead of items due < 10 s before it
 * ```
 */
export const URGENT_LEAD_MS = 10_000;

/**
 * The work queue port: one row per `(kind, key)`, keeping the earliest `notBefore`. Enqueue inside the transaction of
 * the change that makes the work due, so the wake-up commits with it.
 *
 * @example
 * ```ts
 * await ctx.work.enqueue(tx, { kind: 'workflow', key: nodeId });
 * ```
 */
export interface WorkQueue {
  enqueue(tx: SqlExecutor, request: WorkRequest): Promise<void>;
  /**
   * Whether a reconciler is registered for `kind`, on a queue that knows (the kernel's `ctx.work` does; a queue made
   * without `kinds` does not, and has no such method). Enqueue does not check it: work queued for a kind that is
   * registered later, or was removed, must not make the enqueuing transition fail. It is for checks at the edge,
   * such as a workflow's `owner` when it starts.
   */
  handles?(kind: string): boolean;
}

/**
 * What a requeued pass waits on, for its kind's {@link ReconcilerPark} to look at in SQL: while that says the wait
 * still holds, a claim postpones the item by `everyMs` instead of running a pass, never past `until`. The first
 * look is at the requeue (`requeueAfterMs`). An enqueue of the item, or the look finding the wait over, ends it.
 */
export interface WorkPark {
  /** What the kind's park SQL reads (a JSON object: ids, a revision). Stored with the item; no secrets. */
  on: { readonly [key: string]: string | number | boolean | null };
  /** How often to look again while it holds. Default `requeueAfterMs`; 1 ms to 1 day. */
  everyMs?: number;
  /** Not postponed past this: from then on the item is claimed as any other (a deadline to act on). */
  until?: Date;
}

/**
 * What a reconciler may ask for: run again after a delay (the earliest of this and any enqueue wins). With
 * `requeueWritten: true` it says it already wrote that requeue itself, with `commit(ctx, { requeue })` in a statement
 * that committed (so the worker records nothing). With `park`, the looks until then are made by claims, in SQL, and
 * a pass runs only once the wait is over (see {@link WorkPark}); it needs the reconciler's `park` and is ignored with
 * `requeueWritten`.
 */
export type ReconcileResult =
  | undefined
  | { requeueAfterMs: number; requeueWritten?: boolean; park?: WorkPark }
  /**
   * Done, and the item already deleted by the reconciler's own statement (`commit(ctx, { done: true })` answered
   * `doneWritten`): the worker records nothing.
   */
  | { doneWritten: true };

/** The backoff after reconciler errors: `baseMs` doubled per consecutive failure, never above `maxMs`. */
export interface BackoffOptions {
  /** The delay after the first failure. Default 1,000 ms. */
  baseMs?: number;
  /** The cap. Default 300,000 ms (5 minutes). */
  maxMs?: number;
}

/** How one work item ended in one pass. */
export type WorkOutcome =
  /** The reconciler returned nothing; the item was deleted (or kept due when an enqueue arrived meanwhile). */
  | 'done'
  /** The reconciler asked for `{ requeueAfterMs }`. */
  | 'requeued'
  /** The reconciler threw, or no reconciler exists for the kind; the item was kept with backoff. */
  | 'failed'
  /** The worker lost the item's shard; nothing was recorded and the new owner will run it. */
  | 'fenced';

/** One handled item, as reported to `onItem`. */
export interface WorkItemReport {
  kind: string;
  key: string;
  shard: number;
  outcome: WorkOutcome;
  /** Consecutive failures after this pass (0 unless `failed`). */
  attempts: number;
  /** When the item was due (its `not_before` at claim time). */
  dueAt: Date;
  /** When the reconciler was called and when the item was finished, from the Clock. */
  startedAt: Date;
  finishedAt: Date;
  /**
   * When the item is due again after this pass, from the Clock: set for `requeued` (now + `requeueAfterMs`) and
   * `failed` (now + the backoff); absent for `done` and `fenced`. An enqueue made during the pass may make it due sooner.
   */
  requeueAt?: Date;
}

/**
 * The channel every enqueue notifies. The payload is the item's shard, followed by ` urgent` for an urgent wake
 * (`12`, `12 urgent`); {@link parseWorkNotification} reads it.
 *
 * @example
 * ```ts
 * await db.listen(WORK_CHANNEL, (payload) => console.log('work for shard', parseWorkNotification(payload)?.shard));
 * ```
 */
export const WORK_CHANNEL = 'bc_work';

/**
 * The {@link WORK_CHANNEL} payload that tells every worker to rebalance now rather than at its next heartbeat: a worker
 * joined, stopped or gave up leases. Without it a shard released by one worker would wait for its new owner's next
 * heartbeat (up to `heartbeatMs`) with nobody claiming from it.
 *
 * @example
 * ```ts
 * await db.query('SELECT pg_notify($1, $2)', [WORK_CHANNEL, REBALANCE_PAYLOAD]);
 * ```
 */
export const REBALANCE_PAYLOAD = 'rebalance';

/** What follows the shard in the payload of an urgent wake's notification. */
export const URGENT_SUFFIX = ' urgent';

/**
 * A {@link WORK_CHANNEL} payload read: the shard, and whether the wake was urgent; undefined for anything else.
 *
 * @example
 * ```ts
 * parseWorkNotification('12 urgent'); // { shard: 12, urgent: true }
 * parseWorkNotification('7'); // { shard: 7, urgent: false }
 * ```
 */
export function parseWorkNotification(payload: string): { shard: number; urgent: boolean } | undefined {
  const urgent = payload.endsWith(URGENT_SUFFIX);
  const digits = urgent ? payload.slice(0, -URGENT_SUFFIX.length) : payload;
  if (!/^\d{1,9}$/.test(digits)) return undefined;
  return { shard: Number(digits), urgent };
}

/**
 * A read the claim makes for a reconciler, in the claim's own statement, so a pass starts without a round trip of
 * its own. `sql(key, now)` returns a scalar SQL expression (a parenthesised subquery, typically) of the claimed item's
 * key, given as the SQL expression `key` (a text value), and of the claim's now (a timestamptz SQL expression: the
 * worker's clock, which a read of freshness should use rather than the server's); its value reaches the reconciler as
 * `ctx.preloaded`, converted by `to_json`. It is read in the claim's snapshot: like any unlocked read it may be stale
 * by the time the pass writes, and a wake that committed while the claim ran withholds it. It must not write and must not fail: the worker checks
 * it once at start and claims without it if it does.
 *
 * @example
 * ```ts
 * const reconcile: Reconciler = async (key, ctx) => {
 *   const node = ctx.preloaded !== undefined ? ctx.preloaded : await readNode(ctx.sql, key);
 * };
 * const withPreload = Object.assign(reconcile, {
 *   preload: { sql: (key: string) => `(SELECT to_json(n) FROM nodes n WHERE n.id = ${key})` },
 * });
 * ```
 */
export interface ReconcilerPreload {
  readonly sql: (key: string, now: string) => string;
}

/**
 * How a claim looks at a parked item of this kind (see {@link WorkPark}): `sql(on, now)` returns a boolean SQL
 * expression of the item's `park_on` (given as a jsonb SQL expression) and now (a timestamptz SQL expression), true
 * while the wait still holds. Evaluated inside the claim's statement, on due parked items only. It must not write and
 * must not fail: the worker checks it once at start and claims without parking if it does (every parked item then
 * runs its pass, as if never parked). A NULL counts as over.
 *
 * @example
 * ```ts
 * const park = { sql: (on: string, now: string) =>
 *   `EXISTS (SELECT 1 FROM jobs j WHERE j.id = ${on}->>'jobId' AND j.state = 'running' AND j.not_after > ${now})` };
 * const reconciler = Object.assign(reconcile, { park });
 * ```
 */
export interface ReconcilerPark {
  readonly sql: (on: string, now: string) => string;
}

/**
 * A reconciler: called with a work item's key by the worker that owns its shard. Return `{ requeueAfterMs }` to run
 * again later; throw to be retried with backoff. It may carry a `preload` (see {@link ReconcilerPreload}) and a
 * `park` (see {@link ReconcilerPark}).
 */
// biome-ignore lint/suspicious/noConfusingVoidType: a reconciler that asks for nothing may simply return
export type Reconciler = ((key: string, ctx: ModuleContext) => Promise<ReconcileResult | void>) & {
  readonly preload?: ReconcilerPreload;
  readonly park?: ReconcilerPark;
};
