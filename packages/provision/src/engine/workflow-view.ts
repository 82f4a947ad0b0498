import type { ComputeErrorCode, Json } from '@better-compute/core';
import type { StepRunsOn } from '../define/types';
import type { StepPhase, StepState, WorkflowState } from './constants';
import type { LoadedWorkflow, WorkflowError } from './workflow-rows';

/** One step of a workflow, as `workflows.get` shows it. */
export interface StepView {
  stepId: string;
  phase: StepPhase;
  action: string;
  name?: string;
  runsOn: StepRunsOn;
  state: StepState;
  attempt: number;
  commandId: string | null;
  deadline: Date | null;
  startedAt: Date | null;
  finishedAt: Date | null;
  result: Json | null;
  error: { code: ComputeErrorCode; message: string; reason?: string } | null;
}

/** A workflow as the engine's verbs and `workflows.get` return it. */
export interface WorkflowView {
  id: string;
  tenantId: string;
  nodeId: string | null;
  instanceId: string | null;
  profileId: string;
  profileVersion: number;
  state: WorkflowState;
  /** The step in flight (running or waiting), if any. */
  stepId: string | null;
  error: WorkflowError | null;
  owner: string | null;
  cancelReason: string | null;
  commandKinds: string[];
  batchId: string | null;
  createdAt: Date;
  updatedAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
  steps: StepView[];
}

/**
 * The public view of a loaded workflow.
 *
 * @example
 * ```ts
 * const view = toWorkflowView(await loadWorkflow(sql, id));
 * ```
 */
export function toWorkflowView({ workflow, steps }: LoadedWorkflow): WorkflowView {
  const inFlight = steps.find((s) => s.state === 'running' || s.state === 'waiting');
  return {
    id: workflow.id,
    tenantId: workflow.tenantId,
    nodeId: workflow.nodeId,
    instanceId: workflow.instanceId,
    profileId: workflow.profileId,
    profileVersion: workflow.profileVersion,
    state: workflow.state,
    stepId: inFlight?.stepId ?? null,
    error: workflow.error,
    owner: workflow.owner,
    cancelReason: workflow.cancelReason,
    commandKinds: workflow.commandKinds,
    batchId: workflow.batchId,
    createdAt: workflow.createdAt,
    updatedAt: workflow.updatedAt,
    startedAt: workflow.startedAt,
    finishedAt: workflow.finishedAt,
    steps: steps.map((s) => ({
      stepId: s.stepId,
      phase: s.phase,
      action: s.action,
      ...(s.spec.name ? { name: s.spec.name } : {}),
      runsOn: s.runsOn,
      state: s.state,
      attempt: s.attempt,
      commandId: s.commandId,
      deadline: s.deadline,
      startedAt: s.startedAt,
      finishedAt: s.finishedAt,
      result: s.result,
      error: s.error,
    })),
  };
}
