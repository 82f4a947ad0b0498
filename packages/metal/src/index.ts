// The machine lifecycle as decisions: what a request or a workflow's end does to a node. The module that carries the
// moves out (metal(), its reconciler, steps, profiles and API group) builds on these.

export { checkMachineUrl, type MachineAddresses, type MachineUrl } from './http-via-site/machine-url';
export { checkInventory, type Inventory, inventoryLabels, inventorySchema } from './inventory/inventory';
export * from './lifecycle';
export { applyMove, type MoveContext, type MoveExtras, moveEventType, type PhaseProfiles } from './machines/apply-move';
export {
  type DeployRequest,
  type MachineError,
  type MachineRecord,
  readMachine,
  snapshotOf,
} from './machines/machine-rows';
export { METAL_WORK_KIND, metalReconciler } from './machines/reconciler';
export { type MetalModule, type MetalOptions, metal } from './metal-module';
export {
  type HttpViaSiteMethod,
  type HttpViaSiteRequest,
  type HttpViaSiteResponse,
  httpViaSite,
} from './http-via-site/http-via-site';
export { metalMigrationsFolder } from './migrations-folder';
export * from './profiles';
export * from './steps';
