import type { ApiGroup } from '../api/types';
import type { Clock } from '../clock';
import type { CommandKindDefinition, CommandKindRegistry, CommandPolicy, CommandQueue } from '../commands/types';
import type { CommitChange } from '../commit/commit';
import type { EventBus, NewEvent } from '../events/types';
import type { MigrationSource } from '../migrations';
import type { AttestationPort } from '../ports/attestation';
import type { PkiPort } from '../ports/pki';
import type { QuorumPort } from '../ports/quorum';
import type { SecretBroker } from '../ports/secrets';
import type { SqlExecutor } from '../sql/executor';
import type { ShardLease } from '../work/fenced-executor';
import type { Reconciler, WorkQueue, WorkRequest } from '../work/types';

import type { FindingsProvider } from './findings';
import type { Logger } from './logger';

// A reconciler is the work queue's contract (src/work/types.ts); modules declare theirs here.
export type { Reconciler, ReconcilerPark, ReconcilerPreload, WorkPark } from '../work/types';

/**
 * What starting a workflow takes: the tenant, the profile (the latest version the tenant sees when `profileVersion` is
 * omitted), its target (a node, or an instance for instance workflows) and the work kind to queue when it ends.
 *
 * @example
 * ```ts
 * const input: StartWorkflowInput = { tenantId: 'root', profileId: 'ubuntu-24.04-autoinstall', profileVersion: 1, nodeId, owner: 'metal' };
 * ```
 */
export interface StartWorkflowInput {
  tenantId: string;
  profileId: string;
  profileVersion?: number;
  nodeId?: string;
  instanceId?: string;
  /** A work kind queued under the workflow's key when the workflow ends. */
  owner?: string;
  /** The destructive-command batch the workflow's destructive commands carry. */
  batchId?: string;
  /**
   * Called in the start's transaction with the command kinds the workflow records (`workflows.command_kinds`), before
   * the workflow is written and so before any step can run. A batch id it returns becomes the workflow's `batchId`, and
   * the workflow starts held (`paused`): no step runs until {@link WorkflowsPort.resume}. Returning undefined starts it
   * as usual. Not with `batchId`.
   */
  batchFor?: (commandKinds: readonly string[]) => Promise<string | undefined>;
}

/**
 * A workflow start for the caller's commit: `changes` (the workflow's insert first: it returns the workflow's id,
 * and its `requires` hold the caller's gate), `events` (`workflow.created`) and `wake` (its reconciler), all written by
 * the caller's statement with what it writes besides, or none of them.
 *
 * @example
 * ```ts
 * const staged = await ctx.workflows!.stageStart!(ctx.sql, { tenantId, profileId: 'metal.inspect', nodeId, owner: 'metal' });
 * if (staged) await commit(ctx, { changes: [...staged.changes, ...mine], events: staged.events, wake: staged.wake });
 * ```
 */
export interface StagedStart {
  readonly id: string;
  readonly changes: readonly [CommitChange, ...CommitChange[]];
  readonly events: readonly NewEvent[];
  readonly wake: WorkRequest;
}

/**
 * The workflows port (`ctx.workflows`), provided by the provision module. The kernel only carries it.
 *
 * @example
 * ```ts
 * const { id } = await ctx.workflows!.start(tx, { tenantId: 'root', profileId: 'deploy', profileVersion: 1, nodeId, owner: 'metal' });
 * ```
 */
export interface WorkflowsPort {
  start(tx: SqlExecutor, input: StartWorkflowInput): Promise<{ id: string }>;
  /**
   * A start prepared for the caller's own commit (see {@link StagedStart}), so that starting a workflow and what the
   * caller writes with it (metal's lifecycle move) are one statement: a shipped profile costs no read. Undefined when
   * the start cannot be staged (`batchFor`, a stored profile never used before): then `start` in a transaction. The
   * caller's commit finds it `stale` when the workflow cannot be written (the node gone, a workflow active on it, a
   * stored profile shadowing the shipped one); `start` then says why. Bad input, an unknown profile or one that does not
   * resolve throw as `start` does. Optional.
   */
  stageStart?(sql: SqlExecutor, input: StartWorkflowInput): Promise<StagedStart | undefined>;
  /**
   * Aborts a workflow in the caller's transaction, as the `workflows.abort` verb does: pending steps and the command in
   * flight are cancelled, its cleanup runs and it ends `cancelled` (its owner is queued then). Aborting twice does
   * nothing; a succeeded workflow is INVALID_STATE, an unknown one NOT_FOUND.
   */
  abort(tx: SqlExecutor, input: AbortWorkflowInput): Promise<void>;
  /**
   * Resumes a paused workflow in the caller's transaction, as the `workflows.resume` verb does (a workflow held since
   * its start by `batchFor` starts then). Any other state is INVALID_STATE, an unknown workflow NOT_FOUND.
   */
  resume(tx: SqlExecutor, input: { workflowId: string }): Promise<void>;
}

/**
 * What aborting a workflow through {@link WorkflowsPort.abort} takes: the workflow, and a reason kept as its
 * `cancelReason` (at most 1024 characters).
 *
 * @example
 * ```ts
 * await ctx.workflows!.abort(tx, { workflowId, reason: 'metal.abort by an operator' });
 * ```
 */
export interface AbortWorkflowInput {
  workflowId: string;
  reason?: string;
}

/**
 * What a module, a reconciler and a step get.
 *
 * @example
 * ```ts
 * async function reconcile(key: string, ctx: ModuleContext) {
 *   await ctx.sql.transaction((tx) => ctx.events.publish(tx, { tenantId: 'root', subject: `node/${key}`, type: 'node.seen', data: {} }));
 * }
 * ```
 */
export interface ModuleContext {
  sql: SqlExecutor;
  clock: Clock;
  events: EventBus;
  work: WorkQueue;
  commands: CommandQueue;
  /** Every command kind the installed modules registered (what is destructive, what ends its process). */
  commandKinds: CommandKindRegistry;
  workflows?: WorkflowsPort;
  log: Logger;
  pki?: PkiPort;
  secrets?: SecretBroker;
  /** Verifies node-signed command results (pki provides it); optional like `pki` and `secrets`. */
  attestation?: AttestationPort;
  /** The destructive-batch quorum (pki provides it); optional like `pki` and `secrets`. */
  quorum?: QuorumPort;
  config: Readonly<Record<string, unknown>>;
  /** In a reconciler run by a worker: aborted when that worker starts to stop. Undefined elsewhere. */
  signal?: AbortSignal;
  /**
   * In a reconciler with a {@link ReconcilerPreload}: what the claim read for this item (the expression's value as
   * JSON, `null` for SQL NULL). Absent when nothing was preloaded (no preload, an in-memory queue, or an enqueue that
   * committed while the claim ran): the reconciler then reads for itself.
   */
  preloaded?: unknown;
  /**
   * In a reconciler run for a work item (by a worker or `runDueWork`): that item. A reconciler may write the item's
   * requeue in its own last statement (`commit(ctx, { requeue })`) and say so (`requeueWritten`). Undefined elsewhere.
   */
  item?: {
    readonly kind: string;
    readonly key: string;
    /**
     * The item's sequence when it was claimed: `commit`'s `done` deletes the item only while it is still that (no
     * enqueue since). Absent outside a worker's or `runDueWork`'s pass.
     */
    readonly seq?: number;
  };
  /**
   * In a reconciler run by a worker: the shard lease the worker processes `item` under (its `sql` is fenced by the
   * same lease in `transaction`). `commit` fences the one statement it writes without a transaction by it. Undefined
   * elsewhere (`runDueWork`, a call outside a worker): then nothing is fenced.
   */
  lease?: ShardLease;
}

/** Something a module contributes for another module to pick up, e.g. a workflow step (`extension: 'step'`). */
export interface Extension {
  readonly extension: string;
  readonly id: string;
}

/**
 * The unit of extension. Every part is optional but `id`.
 *
 * @example
 * ```ts
 * const audit = {
 *   id: 'audit',
 *   reconcilers: { 'audit.sweep': async (key, ctx) => ({ requeueAfterMs: 60_000 }) },
 *   wakeOnAgentSession: ['audit.sweep'], // keyed by the node id whenever a node's agent connects
 * } satisfies ComputeModule;
 * ```
 */
export interface ComputeModule {
  readonly id: string;
  readonly migrations?: MigrationSource;
  readonly commandKinds?: readonly CommandKindDefinition[];
  readonly reconcilers?: Readonly<Record<string, Reconciler>>;
  /**
   * Work kinds of this module's own `reconcilers` to queue, keyed by the node id, due now and urgent, when an agent of
   * a node opens a session (`openAgentSession`, in its transaction): a reconciler that waits for a node's agent runs
   * as soon as it connects, and its own poll stays the fallback. A pass for a node it has nothing to do for must be
   * harmless. Provision declares its `workflow` kind.
   */
  readonly wakeOnAgentSession?: readonly string[];
  readonly api?: Readonly<Record<string, ApiGroup>>;
  readonly findings?: FindingsProvider;
  readonly extensions?: readonly Extension[];
  readonly dependsOn?: readonly string[];
  /** Checks every command enqueued by anyone; throws to refuse it. */
  readonly commandPolicy?: CommandPolicy;
  /**
   * Provides `ctx.workflows` to every module (the provision module does); built once from the context without it. At
   * most one module may provide it.
   */
  readonly workflows?: (ctx: ModuleContext) => WorkflowsPort;
  /** Called once after migrations, before workers start. */
  readonly init?: (ctx: ModuleContext) => Promise<void> | void;
}
