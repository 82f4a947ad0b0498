export { CERTIFICATES_CHANNEL, CHECKED_CERTIFICATE_TTL_MS } from './checked-certificates';
export { type AgentCommand, agentCommand } from './command-methods';
export type { AgentCaller } from './context';
export {
  AGENT_API_BASE_PATH,
  type AgentApi,
  type AgentApiOptions,
  type AgentPeer,
  type AgentRequest,
  createAgentApi,
  DEFAULT_LONG_POLL_MAX_MS,
  DEFAULT_LONG_POLL_RECHECK_MS,
  MAX_LONG_POLL_MAX_MS,
} from './create-agent-api';
export type { AgentAnswer } from './http';
export { LISTEN_RETRY_MS } from './lasting-listen';
export { INVENTORY_REPORTED_EVENT } from './node-methods';
export { SESSION_TOUCH_EVERY_MS } from './session-keeper';
export { type AttestedInput, MAX_INVENTORY_BYTES } from './validate';
