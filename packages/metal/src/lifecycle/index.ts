export {
  ACCEPTED_IN,
  decideRequest,
  decideWorkflowEnd,
  type HoldPoint,
  type LifecycleMove,
  type LifecycleSnapshot,
  type LifecycleVerb,
  type RequestOptions,
} from './decide';
export {
  isPhaseState,
  NODE_STATES,
  type NodeState,
  PHASE_PROFILES,
  type PhaseState,
  type RestingState,
} from './states';
