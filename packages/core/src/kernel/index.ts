export { type BetterComputeOptions, betterCompute, type Compute, type RunningWorker } from './better-compute';
export { assertModuleId, definePlugin, type PluginDefinition } from './define-plugin';
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
export { createModuleRegistry, type ModuleRegistry } from './registry';
