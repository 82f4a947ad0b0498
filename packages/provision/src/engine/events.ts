import type { Json, NewEvent } from '@better-compute/core';
import type { StepRecord, WorkflowRecord } from './workflow-rows';

/**
 * The 13 event types the engine publishes, with subject `workflow/<workflowId>`.
 *
 * @example
 * ```ts
 * compute.events.subscribe((event) => { if (WORKFLOW_EVENT_TYPES.includes(event.type)) … });
 * ```
 */
export const WORKFLOW_EVENT_TYPES = Object.freeze([
  'workflow.created',
  'workflow.started',
  'workflow.paused',
  'workflow.resumed',
  'workflow.retried',
  'workflow.succeeded',
  'workflow.failed',
  'workflow.cancelled',
  'workflow.step.started',
  'workflow.step.succeeded',
  'workflow.step.failed',
  'workflow.step.retrying',
  'workflow.step.skipped',
] as const);

/** One of {@link WORKFLOW_EVENT_TYPES}. */
export type WorkflowEventType = (typeof WORKFLOW_EVENT_TYPES)[number];

/**
 * A workflow event, for the plan of the transition it describes (or `events.publish` in a verb's transaction). Data
 * holds `workflowId`, `nodeId`, `profileId` and `profileVersion`, plus `extra`.
 *
 * @example
 * ```ts
 * await ctx.events.publish(tx, workflowEvent(workflow, 'workflow.created'));
 * ```
 */
export function workflowEvent(
  workflow: Pick<WorkflowRecord, 'id' | 'tenantId' | 'nodeId' | 'profileId' | 'profileVersion'>,
  type: WorkflowEventType,
  extra: { [key: string]: Json } = {},
): NewEvent {
  return {
    tenantId: workflow.tenantId,
    subject: `workflow/${workflow.id}`,
    type,
    data: {
      workflowId: workflow.id,
      nodeId: workflow.nodeId,
      profileId: workflow.profileId,
      profileVersion: workflow.profileVersion,
      ...extra,
    },
  };
}

/**
 * The data a step event adds: the step, its action, phase and attempt.
 *
 * @example
 * ```ts
 * draft.event('workflow.step.started', stepEventData(step));
 * ```
 */
export function stepEventData(step: StepRecord, extra: { [key: string]: Json } = {}): { [key: string]: Json } {
  return { stepId: step.stepId, action: step.action, phase: step.phase, attempt: step.attempt, ...extra };
}
