export {
  closeAgentSession,
  connectedSiteAgentAtSql,
  connectedSiteAgentSql,
  connectedSiteAgents,
  currentAgentSession,
  currentAgentSessionAtSql,
  openAgentSession,
  touchAgentSession,
} from './agent-sessions';
export { bootLeaseHolder } from './boot-leases';
export { DEFAULT_SESSION_STALE_AFTER_MS } from './freshness';
export { recordAgentSessionWakes } from './session-wakes';
export {
  AGENT_ROLES,
  type AgentRole,
  type AgentSession,
  type AgentSessionRef,
  type BootLease,
  type ConnectedSiteAgent,
  type OpenAgentSessionInput,
  type SessionFreshness,
} from './types';
