// The root export: what a plugin author needs. What better-compute's own packages share beyond it lives on subpaths:
// `/kernel` (queues, workers, commit, agent sessions, migrations), `/checks` (validation helpers), `/nodes`,
// `/conformance`, `/pglite` and `/postgres` (see the README).
export {
  type ApiCallContext,
  type ApiClient,
  type ApiCredential,
  type ApiEvent,
  type ApiEventsPage,
  type ApiGroup,
  type ApiMethod,
  type ApiMethodDefinition,
  type ApiPermission,
  COMPUTE_CREDENTIAL,
  COMPUTE_NODE,
  COMPUTE_TENANT,
  type CreateCredentialInput,
  type CreatedCredential,
  type CredentialsApi,
  type CredentialsPage,
  createCredential,
  type DoctorApi,
  type DoctorReport,
  defineApiGroup,
  defineApiMethod,
  type EventsApi,
  grantCovers,
  type ModuleFindings,
  PROVIDER_FAILED_FINDING,
  type Principal,
  type ResourceRef,
  ROOT_TENANT_ID,
  resolveNodeResource,
  resolveTenantResource,
  resourceNotFound,
  revokeCredential,
} from './api';
export type { Clock } from './clock';
export type {
  Command,
  CommandKindDefinition,
  CommandKindEntry,
  CommandKindRegistry,
  CommandPolicy,
  CommandQueue,
  CommandState,
  NewCommand,
} from './commands';
export * from './duration';
export * from './errors';
export type { ComputeEvent, EventBus, NewEvent } from './events';
export * from './ids';
export type { Json } from './json';
export {
  type BetterComputeOptions,
  betterCompute,
  type Compute,
  definePlugin,
  type Finding,
  type FindingSeverity,
  type FindingsProvider,
  type LogFields,
  type Logger,
  type PluginDefinition,
  type RunningWorker,
} from './kernel';
// The module contracts: ComputeModule, ModuleContext, Reconciler, the workflows port.
export type * from './kernel/module';
export * from './labels';
export * from './manifest';
export type { Migration, MigrationSource } from './migrations';
export * from './ports';
export {
  isSqlError,
  type Notification,
  type NotificationHandler,
  type QueryResult,
  type Row,
  type SqlDatabase,
  SqlError,
  type SqlErrorReason,
  type SqlExecutor,
} from './sql';
export type { ReconcileResult, WorkOutcome, WorkQueue, WorkRequest } from './work';
