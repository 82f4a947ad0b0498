export {
  ACCEPTED_IN,
  decideRequest,
  decideWorkflowEnd,
  type LifecycleMove,
  type LifecycleSnapshot,
  type LifecycleVerb,
} from './decide';
export {
  isPhaseState,
  NODE_STATES,
  type NodeState,
  PHASE_PROFILES,
  type PhaseState,
  type RestingState,
} from './states';
