import type { Json } from '../json/types';
import type { SqlExecutor } from '../sql/executor';

/** An event to publish. */
export interface NewEvent {
  tenantId: string;
  subject: string;
  type: string;
  data: Json;
}

/** An event as stored: `cursor` orders events in commit-safe order and is what a reader resumes from. */
export interface ComputeEvent extends NewEvent {
  id: string;
  at: Date;
  cursor: string;
}

/**
 * The events port. `publish` writes into the outbox inside the caller's transaction, so an event never claims what
 * was rolled back.
 *
 * @example
 * ```ts
 * await ctx.events.publish(tx, { tenantId, subject: `workflow/${id}`, type: 'workflow.started', data: { workflowId: id } });
 * ```
 */
export interface EventBus {
  publish(tx: SqlExecutor, event: NewEvent): Promise<void>;
}

/**
 * What the kernel's event bus adds for core's commit service (not part of the {@link EventBus} port): `stage` checks
 * and stamps an event (`evt_…` id, the clock's time) for `commit` to insert in a statement of its own, and nudges
 * subscribers as `publish` does. The event must be inserted in the same transaction as the change it describes.
 *
 * @example
 * ```ts
 * const staged = bus.stage({ tenantId, subject: `node/${id}`, type: 'node.ready', data: {} });
 * ```
 */
export interface EventStaging {
  stage(event: NewEvent): StagedEvent;
}

/** An event checked and stamped by {@link EventStaging.stage}, ready to insert. */
export interface StagedEvent extends NewEvent {
  id: string;
  at: Date;
}
