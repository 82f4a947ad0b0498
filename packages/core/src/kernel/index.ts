export { type BetterComputeOptions, betterCompute, type Compute, type RunningWorker } from './better-compute';
export { definePlugin, type PluginDefinition } from './define-plugin';
export type { Finding, FindingSeverity, FindingsProvider } from './findings';
export { type LogFields, type Logger, silentLogger } from './logger';
export type { ComputeModule, ModuleContext, Reconciler } from './module';
export { createModuleRegistry } from './registry';
