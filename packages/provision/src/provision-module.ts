import type { ComputeModule, WorkflowsPort } from '@better-compute/core';
import type { Profile, Step } from './define/types';
import { WORKFLOW_WORK_KIND } from './engine/constants';
import { workflowReconciler } from './engine/reconciler';
import { type Engine, startWorkflow } from './engine/start-workflow';
import { buildStepRegistry } from './engine/step-registry';
import { provisionMigrationsFolder } from './migrations-folder';
import { buildShippedProfiles } from './profiles/profile-store';

/** What {@link provisionModule} takes. */
export interface ProvisionOptions {
  /** Steps provision registers as its own extensions. */
  steps?: readonly Step[];
  /** Profiles provision ships as its own. */
  profiles?: readonly Profile[];
  /** Modules and plugins whose steps (extensions of kind `step`) and `profiles` the engine borrows; they register them. */
  modules?: readonly ComputeModule[];
}

/** The provision module: a ComputeModule with the engine it runs. */
export interface ProvisionModule extends ComputeModule {
  readonly id: 'provision';
  readonly engine: Engine;
}

/**
 * The provision module: the workflow engine with its own steps and profiles and those borrowed from `modules`, the
 * `workflow` reconciler, its tables, and `ctx.workflows` for every module. Step ids share one namespace: a duplicate is
 * INVALID_CONFIG.
 *
 * @example
 * ```ts
 * const provision = provisionModule({ steps: [talosReady], profiles: [talos] });
 * const compute = await betterCompute({ modules: [provision] });
 * await compute.database.transaction((tx) => compute.context.workflows!.start(tx, { tenantId: 'root', profileId: 'talos', nodeId }));
 * ```
 */
export function provisionModule(options: ProvisionOptions = {}): ProvisionModule {
  const modules = options.modules ?? [];
  const own = options.steps ?? [];
  const engine: Engine = Object.freeze({
    steps: buildStepRegistry(own, modules),
    profiles: buildShippedProfiles(options.profiles ?? [], modules),
  });
  const workflows = (ctx: Parameters<NonNullable<ComputeModule['workflows']>>[0]): WorkflowsPort => ({
    start: (tx, input) => startWorkflow(tx, ctx, engine, input),
  });
  return Object.freeze({
    id: 'provision' as const,
    migrations: { folder: provisionMigrationsFolder },
    extensions: own,
    reconcilers: { [WORKFLOW_WORK_KIND]: workflowReconciler(engine.steps) },
    workflows,
    engine,
  });
}
