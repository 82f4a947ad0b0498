export {
  closeAgentSession,
  connectedSiteAgents,
  currentAgentSession,
  DEFAULT_SESSION_STALE_AFTER_MS,
  openAgentSession,
  touchAgentSession,
} from './agent-sessions';
export {
  AGENT_ROLES,
  type AgentRole,
  type AgentSession,
  type AgentSessionRef,
  type ConnectedSiteAgent,
  type OpenAgentSessionInput,
  type SessionFreshness,
} from './types';
