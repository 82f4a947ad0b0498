export { type BetterComputeOptions, betterCompute, type Compute, type RunningWorker } from './better-compute';
export { assertModuleId, type ComputePlugin, definePlugin, type PluginDefinition } from './define-plugin';
export type { Finding, FindingSeverity, FindingsProvider } from './findings';
export { type LogFields, type Logger, silentLogger } from './logger';
export type {
  AbortWorkflowInput,
  ComputeModule,
  Extension,
  ModuleContext,
  Reconciler,
  ReconcilerPreload,
  StartWorkflowInput,
  WorkflowsPort,
} from './module';
export { buildModuleRegistry, type ModuleRegistry } from './registry';
