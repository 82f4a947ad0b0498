// The machine lifecycle as decisions: what a request or a workflow's end does to a node. The module that carries the
// moves out (metal(), its reconciler, steps, profiles and API group) builds on these.

export { type BatchesApi, type BatchView, batchesApi } from './api/batches-api';
export {
  decodeMachineCursor,
  encodeMachineCursor,
  type MachineCursor,
  METAL_DEFAULT_LIMIT,
  METAL_MAX_LIMIT,
} from './api/cursor';
export { checkBmcAddress, checkMacs } from './api/inputs';
export { COMPUTE_SITE, type MetalApi, metalApi, resolveSiteResource } from './api/metal-api';
export {
  SITE_TOKEN_TTL,
  type SiteJoinToken,
  type SiteSummary,
  type SitesApi,
  type SitesPage,
  type SiteView,
  sitesApi,
} from './api/sites-api';
export type { MachineStepView, MachineSummary, MachineView, MachineWorkflowView } from './api/views';
export { METAL_DOCTOR_LIMITS, metalFindings } from './doctor/findings';
export {
  type HttpViaSiteMethod,
  type HttpViaSiteRequest,
  type HttpViaSiteResponse,
  httpViaSite,
} from './http-via-site/http-via-site';
export { checkMachineUrl, type MachineAddresses, type MachineUrl } from './http-via-site/machine-url';
export { checkInventory, type Inventory, inventoryLabels, inventorySchema } from './inventory/inventory';
export * from './lifecycle';
export {
  applyMove,
  type MoveContext,
  type MoveExtras,
  moveEventType,
  moveWrite,
  type PhaseProfiles,
  startOfMove,
} from './machines/apply-move';
export {
  type DeployRequest,
  type MachineError,
  type MachineRecord,
  readMachine,
  snapshotOf,
} from './machines/machine-rows';
export {
  awaitingOf,
  BATCH_TTL_MS,
  batchFor,
  HELD_WORKFLOW_SQL,
  type MachineAwaiting,
  readHeldWorkflow,
} from './machines/quorum';
export { METAL_WORK_KIND, metalMachineReadSql, metalReconciler } from './machines/reconciler';
export { type MetalModule, type MetalOptions, metal } from './metal-module';
export { metalMigrationsFolder } from './migrations-folder';
export * from './profiles';
export * from './steps';
