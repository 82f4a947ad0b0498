import type { Clock, ComputeModule, WorkflowsPort } from '@better-compute/core';
import { type ImageVerifier, imageVerifier } from '@better-compute/pki';
import { type ProvisionApi, provisionApi } from './api';
import { createConfigUnitRegistry } from './config-units/registry';
import type { ConfigUnit } from './config-units/types';
import { driverTargetsOf, type Profile, type Step, workflowPreloadsOf } from './define/types';
import { workflowEndWritesOf } from './define/workflow-end-write';
import { provisionFindings } from './doctor/findings';
import { WORKFLOW_WORK_KIND } from './engine/constants';
import { workflowReconciler } from './engine/reconciler';
import { type Engine, stageStartWorkflow, startWorkflow } from './engine/start-workflow';
import { abortWorkflow, resumeWorkflow } from './engine/verbs';
import { type ImageCatalog, imageCatalog } from './images/catalog';
import { provisionMigrationsFolder } from './migrations-folder';
import { buildShippedProfiles } from './profiles/profile-store';
import { buildProvisionSteps, builtinSteps } from './steps/builtin-steps';
import type { UserDataOptions } from './user-data/options';

/** What {@link provisionModule} takes. */
export interface ProvisionOptions {
  /** Steps provision registers as its own extensions. */
  steps?: readonly Step[];
  /** Profiles provision ships as its own. */
  profiles?: readonly Profile[];
  /** Modules and plugins whose steps (extensions of kind `step`) and `profiles` the engine borrows; they register them. */
  modules?: readonly ComputeModule[];
  /** What `userdata.render` renders with: `controlPlaneUrl`, `bcdUrl`, `bcdSha256` and `templates` by name. */
  userData?: UserDataOptions;
  /** Config units a profile's `hostConfig` may name besides the built-ins; a unit named like a built-in replaces it. */
  configUnits?: readonly ConfigUnit[];
  /** Checks an image's signature when it is registered (and resolved through `images`); default pki's `imageVerifier`. */
  imageVerifier?: ImageVerifier;
}

/** The provision module: a ComputeModule with the engine it runs. */
export interface ProvisionModule extends ComputeModule {
  readonly id: 'provision';
  readonly engine: Engine;
  /** The `images`, `profiles` and `workflows` API groups, built from the engine and the `imageVerifier`. */
  readonly api: ProvisionApi;
  /** The image catalog bound to the module's `imageVerifier` and the kernel's clock. */
  readonly images: ImageCatalog;
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
  // Provision's own steps: the built-in ones (userdata.render, wait.agentJoined, wait.observedGeneration) first.
  const builtin = builtinSteps(options.userData);
  const own = [...builtin, ...(options.steps ?? [])];
  const engine: Engine = Object.freeze({
    steps: buildProvisionSteps(builtin, options.steps ?? [], modules),
    profiles: buildShippedProfiles(options.profiles ?? [], modules),
    configUnits: createConfigUnitRegistry(options.configUnits ?? []),
  });
  // The kernel's clock once init has run (images registered before that use the system clock).
  const kernel: { clock?: Clock } = {};
  const workflows = (ctx: Parameters<NonNullable<ComputeModule['workflows']>>[0]): WorkflowsPort => ({
    start: (tx, input) => startWorkflow(tx, ctx, engine, input),
    stageStart: (sql, input) => stageStartWorkflow(sql, ctx, engine, input),
    // The verb in the caller's transaction: its own transaction becomes a savepoint there.
    abort: async (tx, input) => {
      const reason = input.reason === undefined ? {} : { reason: input.reason };
      await abortWorkflow({ ...ctx, sql: tx }, { workflowId: input.workflowId, ...reason });
    },
    resume: async (tx, input) => {
      await resumeWorkflow({ ...ctx, sql: tx }, { workflowId: input.workflowId });
    },
  });
  return Object.freeze({
    id: 'provision' as const,
    migrations: { folder: provisionMigrationsFolder },
    extensions: own,
    reconcilers: {
      [WORKFLOW_WORK_KIND]: workflowReconciler(
        engine.steps,
        engine.configUnits,
        driverTargetsOf(modules),
        workflowPreloadsOf(modules),
        workflowEndWritesOf(modules),
      ),
    },
    // A node workflow's item is keyed by the node id: a step waiting for the node's agent (an agent step awaiting
    // 'rejoin', wait.agentJoined, metal.ensureRamdisk) runs as soon as it connects; its poll stays the fallback.
    wakeOnAgentSession: [WORKFLOW_WORK_KIND],
    findings: provisionFindings,
    init(ctx: Parameters<NonNullable<ComputeModule['init']>>[0]) {
      kernel.clock = ctx.clock;
    },
    workflows,
    api: provisionApi(engine, options.imageVerifier ?? imageVerifier),
    engine,
    images: imageCatalog(options.imageVerifier ?? imageVerifier, () => kernel.clock),
  });
}
