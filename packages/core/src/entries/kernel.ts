// `@better-compute/core/kernel`: what better-compute's own packages share beyond a plugin author's root export: agent
// sessions and sites' boot leases, the command queue's state machine and limits, the commit service, the work queue
// and its workers, the migrations runner, the system clock, the silent logger and the API's method listing.
export {
  AGENT_ROLES,
  type AgentRole,
  type AgentSession,
  type AgentSessionRef,
  type BootLease,
  bootLeaseHolder,
  type ConnectedSiteAgent,
  closeAgentSession,
  connectedSiteAgentAtSql,
  connectedSiteAgentSql,
  connectedSiteAgents,
  currentAgentSession,
  currentAgentSessionAtSql,
  DEFAULT_SESSION_STALE_AFTER_MS,
  type OpenAgentSessionInput,
  openAgentSession,
  recordAgentSessionWakes,
  type SessionFreshness,
  touchAgentSession,
} from '../agents';
// What the server (apps/server) serves beside compute.handler: bearer-token authentication and grants for its own
// routes (the SSE event stream), the OpenAPI document, and the outbox read by cursor.
export {
  apiCallError,
  authenticate,
  bodyTooLargeError,
  createOpenApiDocument,
  grantsPermission,
  inputJsonSchema,
  listApiMethods,
  malformedBodyError,
  parseJsonBody,
  readJsonBody,
} from '../api';
export { addMs, systemClock } from '../clock';
export {
  assertCommandTransition,
  COMMANDS_CHANNEL,
  type CommandRow,
  type CommandStaging,
  commandFromJson,
  commandJsonSql,
  createCommandKindRegistry,
  DISPATCHABLE_SQL,
  isCommandDue,
  isCommandKindName,
  isTerminalCommandState,
  MAX_COMMAND_REASON_LENGTH,
  MAX_POLL_LIMIT,
  OPEN_COMMAND_STATES,
  toCommand,
} from '../commands';
export {
  type CommitChange,
  type CommitChangeInput,
  type CommitContext,
  type CommitRequest,
  type CommitResult,
  commit,
  type StagedWrite,
} from '../commit';
export type { EventStaging } from '../events';
export { readEvents } from '../events';
export { decodeEventCursor, encodeEventCursor } from '../events/cursor';
export { silentLogger } from '../kernel';
export { applyMigrations, type MigrationReport, type ModuleMigrations, readMigrationFolder } from '../migrations';
export { coreMigrationsFolder } from '../migrations-folder';
export { sendNotifications } from '../sql';
export {
  createWorkQueue,
  FencedExecutor,
  isFencedError,
  startWorker,
  URGENT_LEAD_MS,
  type WorkerHandle,
  type WorkerOptions,
  type WorkQueueOptions,
} from '../work';
