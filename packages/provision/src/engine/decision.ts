import type { ProfileStep, StepWorkflow } from '../define/types';

/** A control-plane step to run outside any transaction, with what its context needs. */
export interface RunRequest {
  workflowId: string;
  /** The reconciler key (node id or workflow id): where the step's commands wake. */
  key: string;
  tenantId: string;
  stepId: string;
  action: string;
  attempt: number;
  deadline: Date;
  spec: ProfileStep;
  node: { id: string; siteId: string | undefined; poolId?: string } | undefined;
  batchId: string | undefined;
  /** The workflow as the step's context gives it. */
  workflow: StepWorkflow;
}

/** What one transition leaves the reconciler to do next. */
export type Decision =
  /** Another transition is due at once. */
  | { kind: 'continue' }
  /** Run a control-plane step (its `running` mark is committed), then settle it. */
  | { kind: 'run'; request: RunRequest }
  /**
   * Nothing to do before `until` (a command, a rejoin, a site agent, a deadline). With `command`: a waiting agent
   * step's look found its command open; until `deadline` the looks that find it still open can be made by the claim
   * (the reconciler parks its item on it).
   */
  | { kind: 'wait'; until: Date; command?: { id: string; deadline: Date } }
  /** Nothing to do until something wakes the workflow (no active workflow, or a paused one). */
  | { kind: 'idle' };

/** The earlier of `now + ms` and the deadline; with `command`, the open command the wait is on (see `Decision`). */
export function waitUntil(
  now: Date,
  ms: number,
  deadline: Date | null,
  command?: { id: string; deadline: Date },
): Decision {
  const at = now.getTime() + ms;
  return {
    kind: 'wait',
    until: new Date(deadline ? Math.min(at, deadline.getTime()) : at),
    ...(command ? { command } : {}),
  };
}
