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
  /**
   * Checks and stamps an event (`evt_…` id, the clock's time) for a caller that writes it in a statement of its own
   * (see `commit`, which writes staged events), and nudges subscribers as `publish` does. The caller must insert it in the same
   * transaction as the change it describes.
   */
  stage(event: NewEvent): StagedEvent;
}

/** An event checked and stamped by {@link EventBus.stage}, ready to insert. */
export interface StagedEvent extends NewEvent {
  id: string;
  at: Date;
}
