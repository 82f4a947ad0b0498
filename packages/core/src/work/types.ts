import type { SqlExecutor } from '../sql/executor';

/** A request to run a reconciler for `(kind, key)`, no earlier than `notBefore` (now when omitted). */
export interface WorkRequest {
  kind: string;
  key: string;
  notBefore?: Date;
}

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
}

/** What a reconciler may ask for: run again after a delay (the earliest of this and any enqueue wins). */
export type ReconcileResult = undefined | { requeueAfterMs: number };
