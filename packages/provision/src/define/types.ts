import {
  type Command,
  ComputeError,
  type Duration,
  type Json,
  type ModuleContext,
  type SqlExecutor,
} from '@better-compute/core';
import type { StagedWrite } from '@better-compute/core/kernel';
import type { StandardSchemaV1 } from '@standard-schema/spec';

/** Where a step runs: in the control plane, or as a command to the site agent, the node's `bcd` or its ramdisk. */
export type StepRunsOn = 'control-plane' | 'site' | 'node' | 'ramdisk';

/** The agents a command can go to. */
export type AgentPlace = Exclude<StepRunsOn, 'control-plane'>;

/** What to do once a step's retries are spent: `fail` (the default), `continue`, `rescue`, or a step to run first. */
export type OnFailure = 'fail' | 'continue' | 'rescue' | ProfileStep;

/**
 * One step of a profile (the "Step options" of the workflows page).
 *
 * @example
 * ```ts
 * const kexec: ProfileStep = {
 *   use: 'boot.kexec', on: 'ramdisk', await: 'rejoin', timeout: '15m',
 *   onFailure: { use: 'power.setPower', on: 'site', with: { action: 'reset' } },
 * };
 * ```
 */
export interface ProfileStep {
  /** A registered step id, else a driver operation `<concern>.<operation>` (with `on:` naming an agent). */
  readonly use: string;
  readonly on?: StepRunsOn;
  /** The step's input, validated against the step's `input` at expansion and before each run. */
  readonly with?: { readonly [key: string]: Json };
  /** A display name. */
  readonly name?: string;
  /** A label expression on the node; false: the step is `skipped`. */
  readonly when?: string;
  /** Overrides the definition's timeout (one attempt's budget). */
  readonly timeout?: Duration;
  /** Overrides the definition's retries (0 to 100). */
  readonly retries?: number;
  readonly onFailure?: OnFailure;
  /** For self-terminating commands: succeed when the agent comes back with a new boot or role. */
  readonly await?: 'rejoin';
  /** Another `use`, resolved the same way when `use` does not resolve. */
  readonly fallback?: string;
}

/**
 * What a control-plane step's `run` receives: the whole module context plus the workflow's coordinates.
 *
 * @example
 * ```ts
 * async run(input, ctx: StepContext) {
 *   ctx.log.info('rendering', { workflowId: ctx.workflowId, stepId: ctx.stepId, attempt: ctx.attempt });
 * }
 * ```
 */
export interface StepContext extends ModuleContext {
  readonly workflowId: string;
  /**
   * The workflow as the engine holds it (our addition to the page's table): the profile version it pinned, its owner,
   * when it started. A step that needs its profile's fields or its start reads them here, not from the workflow row.
   */
  readonly workflow: StepWorkflow;
  /** The step's id within the workflow: `main.3`, `main.3.on-failure`, `cleanup.1`. */
  readonly stepId: string;
  /** 0 on the first attempt, then 1, 2, … on retries. */
  readonly attempt: number;
  /** `wf:<workflowId>:<stepId>`, the same on every run of the step. */
  readonly idempotencyKey: string;
  /** The destructive-command batch the workflow runs under, when it has one. */
  readonly batchId?: string;
  /** The target node, for node workflows. */
  readonly node?: { readonly id: string; readonly siteId: string | undefined; readonly poolId?: string };
  /** The tenant the workflow runs in. */
  readonly tenantId: string;
  /** The command kinds the step declared in `sends`; undefined when it declared none (nothing is checked). */
  readonly sends?: readonly string[];
  /** Aborted at the step's deadline and when the worker stops. */
  readonly signal: AbortSignal;
  /** The step's deadline: the start of this attempt plus its timeout. */
  readonly deadline: Date;
  /** Accepted but discarded for control-plane steps today. */
  emit(progress: Json): void;
  /**
   * What the worker's claim read for this run in its own statement (see {@link WorkflowPreload}), when it did: a step
   * that finds here what it would read saves the round trip. Absent when the run was not claimed with a preload.
   */
  readonly preloads?: StepPreloads;
  /**
   * Writes `write` with the step's result: by the statement that records this run succeeded (and starts what comes
   * next), all or nothing with it. Nothing is written when the run does not succeed, or when the step is no longer
   * running this attempt (aborted meanwhile); when the write's `requires` fail (what it read changed), the step runs
   * again. A run that writes what its result says (an inventory as the node's facts) saves a statement of its own.
   * A write that says what it leaves (`leaves`, see core's `StagedWrite`) lets the engine start the next step in the
   * same statement; one that does not is written first, and the pass reads the workflow again before it goes on.
   * Present in the runs of control-plane steps.
   *
   * @example
   * ```ts
   * ctx.writeWithResult?.({ changes: [{ name: 'acme_seen', sql: ({ bind, guard }) => `UPDATE plg_acme SET seen = true WHERE id = ${bind(id)} AND ${guard}` }], write: (tx) => markSeen(tx, id), leaves: {} });
   * ```
   */
  writeWithResult?(write: StagedWrite): void;
}

/**
 * The workflow a step runs in, as its context gives it (see {@link StepContext}).
 *
 * @example
 * ```ts
 * const image = ctx.workflow.profile.image; // the pinned profile's image, with no read
 * ```
 */
export interface StepWorkflow {
  /** The profile version the workflow pinned at its start, as stored in its row. */
  readonly profile: Profile;
  /** Who started it to hear of its end (`metal` for the lifecycle's workflows), null for none. */
  readonly owner: string | null;
  /** When its first transition started it. */
  readonly startedAt: Date;
}

/**
 * What the claim read for a control-plane step's run, in the claim's statement: at most as old as the claim, like a
 * read at the start of the pass (a settle or an agent's join after it wakes the workflow for another pass).
 *
 * @example
 * ```ts
 * const machine = ctx.preloads?.reads['acme.machine'] ?? (await readMachine(ctx));
 * const sent = ctx.preloads?.commands?.filter((c) => c.key.endsWith(':power'));
 * ```
 */
export interface StepPreloads {
  /**
   * Every command this attempt of the step had sent (to any agent) when the claim read it; `[]` for an attempt this
   * pass started; absent when the claim did not read them (more than 16, or a result over 64 KiB: a long `poll`).
   * `awaitCommand` looks here first (a command the run itself sent since is looked up as before).
   */
  readonly commands?: readonly Command[];
  /** By {@link WorkflowPreload} id: what its SQL read for the workflow (JSON; `null` for SQL NULL). */
  readonly reads: Readonly<Record<string, Json>>;
}

/**
 * A module's read for its own steps, made by the engine's claim with the workflow it preloads (a module extension of
 * kind `workflow-preload`), so a step's run finds it in `ctx.preloads.reads[id]` instead of reading it itself.
 * `sql` returns a scalar SQL expression (a parenthesised subquery, typically, whose value `to_json` converts) of the
 * workflow row `workflow` (an alias with the `workflows` table's columns: `${workflow}.node_id`, `${workflow}.id`)
 * and of the claim's `now` (a timestamptz expression: the worker's clock). It must not write and must not fail (the
 * worker checks the claim's preloads at start and claims without them if they fail). A step must work without it:
 * the value is absent when the claim read none.
 *
 * @example
 * ```ts
 * const machinePreload: WorkflowPreload = {
 *   extension: 'workflow-preload',
 *   id: 'acme.machine',
 *   sql: ({ workflow }) => `(SELECT to_json(m) FROM acme_machines m WHERE m.node_id = ${workflow}.node_id)`,
 * };
 * // in a step: const machine = ctx.preloads?.reads['acme.machine'] ?? (await readMachine(ctx));
 * ```
 */
export interface WorkflowPreload {
  readonly extension: 'workflow-preload';
  readonly id: string;
  sql(refs: { readonly workflow: string; readonly now: string }): string;
  /**
   * This preload's value for the key's next workflow, which an owner's end write starts in the statement that ends
   * the workflow the claim read (see `StagedEndWrite.next`), from the value the claim read (`value`): what a claim of
   * `next` would read at its start, as far as the pass's own writes let it know, or undefined when it cannot say. The
   * engine takes the next workflow's first transitions in the same pass only when every preload the claim read says.
   * Must not read or write.
   *
   * @example
   * ```ts
   * following: (value, next) => ({ ...(value as object), drivers: next.document.drivers ?? null }),
   * ```
   */
  following?(value: Json, next: FollowingWorkflow): Json | undefined;
}

/** The workflow an end write starts, as {@link WorkflowPreload.following} is told it. */
export interface FollowingWorkflow {
  readonly workflowId: string;
  readonly nodeId: string | null;
  /** The profile version the workflow runs, as it is pinned in its row. */
  readonly document: Profile;
  /** When its first transitions start it. */
  readonly startedAt: Date;
}

/**
 * What a {@link WorkflowPreload} id looks like: dotted lower-case segments, at most 128 characters.
 *
 * @example
 * ```ts
 * WORKFLOW_PRELOAD_ID_PATTERN.test('metal.machine'); // true
 * ```
 */
export const WORKFLOW_PRELOAD_ID_PATTERN = /^(?=.{1,128}$)[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)*$/;

/**
 * The workflow preloads among modules' extensions, in module order. One whose id is malformed or taken, or whose `sql`
 * does not return a non-empty SQL expression for sample arguments, is INVALID_CONFIG at its path
 * (`['modules', m, 'extensions', e]`).
 *
 * @example
 * ```ts
 * const preloads = workflowPreloadsOf([metal()]);
 * ```
 */
export function workflowPreloadsOf(
  modules: readonly { readonly extensions?: readonly unknown[] }[],
): WorkflowPreload[] {
  const byId = new Map<string, WorkflowPreload>();
  modules.forEach((module, m) => {
    (module.extensions ?? []).forEach((extension, e) => {
      const candidate = extension as Partial<WorkflowPreload> | null;
      if (candidate?.extension !== 'workflow-preload') return;
      const path = ['modules', m, 'extensions', e];
      const id = candidate.id;
      if (typeof id !== 'string' || !WORKFLOW_PRELOAD_ID_PATTERN.test(id)) {
        throw new ComputeError('INVALID_CONFIG', 'a workflow preload id must be dotted lower-case segments', {
          details: { path: [...path, 'id'] },
        });
      }
      if (byId.has(id)) {
        throw new ComputeError('INVALID_CONFIG', `workflow preload ${id} is registered twice`, {
          details: { path: [...path, 'id'] },
        });
      }
      let sample: unknown;
      try {
        sample =
          typeof candidate.sql === 'function' ? candidate.sql({ workflow: 'w', now: '$1::timestamptz' }) : undefined;
      } catch {
        sample = undefined;
      }
      if (typeof sample !== 'string' || sample.trim() === '') {
        throw new ComputeError('INVALID_CONFIG', `workflow preload ${id}: sql must return an SQL expression`, {
          details: { path: [...path, 'sql'] },
        });
      }
      if (candidate.following !== undefined && typeof candidate.following !== 'function') {
        throw new ComputeError('INVALID_CONFIG', `workflow preload ${id}: following must be a function`, {
          details: { path: [...path, 'following'] },
        });
      }
      byId.set(id, candidate as WorkflowPreload);
    });
  });
  return [...byId.values()];
}

/** The input schema of a step: a manifest or any Standard Schema. */
export type StepInputSchema = StandardSchemaV1;

interface StepDefinitionBase<S extends StepInputSchema> {
  /** Dotted, lower-case first segment, at most 128 characters, e.g. `power.setPower` or `acme.renderIso`. */
  readonly id: string;
  readonly version?: string;
  /** One attempt's budget; a profile step may override it. */
  readonly timeout: Duration;
  /** Extra attempts after a failure, 0 to 100 (default 0); a profile step may override it. */
  readonly retries?: number;
  /** Whether running it twice does no harm. */
  readonly retrySafe: boolean;
  readonly input: S;
  /** Steps that run, last in first out, in the cleanup phase if this step started. */
  readonly cleanup?: readonly ProfileStep[];
  readonly description?: string;
}

/**
 * A control-plane step (optionally relaying commands to agents with `awaitCommand`).
 *
 * @example
 * ```ts
 * const render: ControlPlaneStepDefinition<typeof input> = { id: 'acme.render', runsOn: 'control-plane', timeout: '1m', retrySafe: true, input, run: async () => ({}) };
 * ```
 */
export interface ControlPlaneStepDefinition<S extends StepInputSchema = StepInputSchema> extends StepDefinitionBase<S> {
  readonly runsOn: 'control-plane';
  // A method, not a function property, so a step typed by its own input is still a `Step` (parameters compare
  // bivariantly): registries and module extensions hold steps of many inputs.
  // The result is typed loosely so a row read with `ctx.sql` can be returned as the docs do (`return rows[0]`); it
  // must be JSON, which the engine checks when it settles the step (a non-JSON result fails it INTERNAL).
  run(input: StandardSchemaV1.InferOutput<S>, ctx: StepContext): Promise<unknown>;
  /** The places a profile may name with `on:`. */
  readonly relays?: readonly AgentPlace[];
  /** Every dotted command kind `run` may enqueue; any other is INVALID_CONFIG. */
  readonly sends?: readonly string[];
}

/**
 * An agent step: exactly one command of kind `command`, whose payload is the step's validated input.
 *
 * @example
 * ```ts
 * const reboot: AgentStepDefinition = { id: 'node.reboot', runsOn: 'node', command: 'node.reboot', await: 'rejoin', timeout: '15m', retrySafe: false, input: manifest({}) };
 * ```
 */
export interface AgentStepDefinition<S extends StepInputSchema = StepInputSchema> extends StepDefinitionBase<S> {
  readonly runsOn: AgentPlace;
  /** The dotted command kind sent. */
  readonly command: string;
  /** Complete when the agent comes back with a new boot or role, for self-terminating kinds. */
  readonly await?: 'rejoin';
}

/** A step definition of either kind. */
export type StepDefinition<S extends StepInputSchema = StepInputSchema> =
  | ControlPlaneStepDefinition<S>
  | AgentStepDefinition<S>;

/** A defined step: the definition frozen, marked as an extension of kind `step`. */
export type Step<D extends StepDefinition = StepDefinition> = Readonly<D> & { readonly extension: 'step' };

/** A config unit a profile's `hostConfig` names. */
export interface HostConfigUnit {
  readonly name: string;
  readonly settings?: { readonly [key: string]: Json };
  readonly when?: string;
}

/**
 * A profile: a versioned document of steps (the profile fields of DESIGN.md).
 *
 * @example
 * ```ts
 * const inspect: ProfileDefinition = { id: 'inspect', version: 1, target: 'metal', steps: [{ use: 'inspect.run', on: 'ramdisk' }] };
 * ```
 */
export interface ProfileDefinition {
  /** Dotted or kebab-case: lower-case letters and digits, `-` and `.` between them, at most 128 characters. */
  readonly id: string;
  /** A whole number ≥ 1. */
  readonly version: number;
  readonly target: 'metal' | 'instance';
  /** `provision` (default) or `adopt`: take over a running machine, with no image, user data or steps. */
  readonly mode?: 'provision' | 'adopt';
  /** What the node becomes (`host`, …). */
  readonly role?: string;
  readonly description?: string;
  readonly labels?: { readonly [key: string]: string };
  /** Metal only: concern → driver binding (`{ name: 'redfish', … }`), used by driver operations. */
  readonly drivers?: { readonly [concern: string]: DriverBinding };
  /** `name@version` in the image catalog. */
  readonly image?: string;
  /** `cloud-init`, `ignition`, `talos`, with an optional registered template name. */
  readonly userData?: { readonly kind: string; readonly template?: string };
  /** Lifetime of the join token `userdata.render` mints (default 7200). */
  readonly tokenTtlSeconds?: number;
  /** Metal only: the node's NodeSpec `host` section on success. */
  readonly hostConfig?: { readonly units: readonly HostConfigUnit[] };
  readonly steps?: readonly ProfileStep[];
  readonly acceptance?: readonly ProfileStep[];
  readonly cleanup?: readonly ProfileStep[];
}

/**
 * What a profile's `drivers` binds a concern to: an object naming the driver (`ipmi`, `redfish`, or any name a site
 * agent implements), with any further JSON settings the driver takes. It travels as `driver` in `driver.invoke`.
 *
 * @example
 * ```ts
 * const power: DriverBinding = { name: 'redfish', insecure: false };
 * ```
 */
export interface DriverBinding {
  readonly name: string;
  readonly [setting: string]: Json;
}

/** What a driver binding's `name` looks like: lower-case letters, digits and `-`, starting with a letter. */
export const DRIVER_NAME_PATTERN = /^[a-z][a-z0-9-]*$/;

/** A defined profile: deeply frozen. */
export type Profile<P extends ProfileDefinition = ProfileDefinition> = Readonly<P>;

/**
 * The concerns a driver operation `<concern>.<operation>` may name.
 *
 * @example
 * ```ts
 * DRIVER_CONCERNS.includes('power'); // true
 * ```
 */
export const DRIVER_CONCERNS = Object.freeze([
  'power',
  'management',
  'boot',
  'deploy',
  'inspect',
  'virtual-media',
  'console',
  'bios',
  'raid',
  'firmware',
  'config',
] as const);

/**
 * A module's hook into driver operations (an extension of kind `driver-target`): given the target node, the extra
 * fields its `driver.invoke` payload carries besides `{ operation, driver, input }` (metal: the machine's `bmc`). The
 * engine calls it only for a profile step that resolved to a driver operation, in the transaction that sends the
 * command; it never overrides `operation`, `driver` or `input`. Undefined adds nothing.
 *
 * @example
 * ```ts
 * const bmcTarget: DriverTarget = {
 *   extension: 'driver-target',
 *   id: 'metal.bmc',
 *   async resolve(sql, { nodeId }) {
 *     const { rows } = await sql.query('SELECT bmc_address FROM metal_machines WHERE node_id = $1', [nodeId]);
 *     return rows[0] ? { bmc: { address: rows[0].bmc_address, driver: 'ipmi' } } : undefined;
 *   },
 * };
 * ```
 */
export interface DriverTarget {
  readonly extension: 'driver-target';
  readonly id: string;
  resolve(sql: SqlExecutor, target: { nodeId: string }): Promise<{ readonly [field: string]: Json } | undefined>;
  /**
   * The same fields from what the worker's claim read for the workflow (the modules' workflow preloads, by id), so a
   * pass that plans right after its claim sends the command without `resolve`'s read: `{}` to add nothing, undefined
   * when the reads do not tell (then `resolve` reads).
   */
  fromReads?(
    reads: Readonly<Record<string, Json>>,
    target: { nodeId: string },
  ): { readonly [field: string]: Json } | undefined;
}

/**
 * The driver targets among modules' extensions, in module order.
 *
 * @example
 * ```ts
 * const targets = driverTargetsOf([metal()]);
 * ```
 */
export function driverTargetsOf(modules: readonly { readonly extensions?: readonly unknown[] }[]): DriverTarget[] {
  return modules.flatMap((module) =>
    (module.extensions ?? []).filter(
      (extension): extension is DriverTarget =>
        (extension as Partial<DriverTarget>)?.extension === 'driver-target' &&
        typeof (extension as Partial<DriverTarget>).resolve === 'function',
    ),
  );
}

/** The places a step runs, in the order the pages list them. */
export const STEP_PLACES = Object.freeze(['control-plane', 'site', 'node', 'ramdisk'] as const);

/** The most steps a workflow holds across all phases. */
export const MAX_WORKFLOW_STEPS = 512;

/**
 * The highest profile version: versions are stored in an `integer` (int4) column, so anything above is refused where
 * the profile is checked rather than by PostgreSQL.
 *
 * @example
 * ```ts
 * defineProfile({ id: 'deploy', version: MAX_PROFILE_VERSION + 1, target: 'metal' }); // throws, path ['version']
 * ```
 */
export const MAX_PROFILE_VERSION = 2_147_483_647;
