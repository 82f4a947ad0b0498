export {
  ACTIVE_WORKFLOW_STATES,
  ENGINE_DEFAULTS,
  type StepPhase,
  type StepState,
  WORKFLOW_WORK_KIND,
  type WorkflowState,
} from './constants';
export { WORKFLOW_EVENT_TYPES, type WorkflowEventType } from './events';
export { DRIVER_INVOKE_KIND, type ExpandedStep, type Expansion, expandProfile } from './expand';
export { type Engine, startWorkflow } from './start-workflow';
export { isStepNotReady, StepNotReady, stepNotReady } from './step-not-ready';
export type { StepRegistry } from './step-registry';
export {
  abortWorkflow,
  getWorkflow,
  pauseWorkflow,
  resumeWorkflow,
  retryWorkflow,
  type VerbContext,
  type WorkflowRef,
} from './verbs';
export type { StepError, WorkflowError } from './workflow-rows';
export type { StepView, WorkflowView } from './workflow-view';
