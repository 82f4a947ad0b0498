import type { ApiGroup } from '../api/types';
import type { Clock } from '../clock';
import type { CommandKindDefinition, CommandPolicy, CommandQueue } from '../commands/types';
import type { EventBus } from '../events/types';
import type { MigrationSource } from '../migrations';
import type { PkiPort } from '../ports/pki';
import type { SecretBroker } from '../ports/secrets';
import type { SqlExecutor } from '../sql/executor';
import type { ReconcileResult, WorkQueue } from '../work/types';
import type { FindingsProvider } from './findings';
import type { Logger } from './logger';

/**
 * The workflows port (`ctx.workflows`), provided by the provision module. The kernel only carries it.
 */
export interface WorkflowsPort {
  start(tx: SqlExecutor, input: Record<string, unknown>): Promise<{ id: string }>;
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
  workflows?: WorkflowsPort;
  log: Logger;
  pki?: PkiPort;
  secrets?: SecretBroker;
  config: Readonly<Record<string, unknown>>;
}

/**
 * A reconciler: called with a work item's key by the worker that owns its shard. Return `{ requeueAfterMs }` to run
 * again later; throw to be retried with backoff.
 */
// biome-ignore lint/suspicious/noConfusingVoidType: a reconciler that asks for nothing may simply return
export type Reconciler = (key: string, ctx: ModuleContext) => Promise<ReconcileResult | void>;

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
 * } satisfies ComputeModule;
 * ```
 */
export interface ComputeModule {
  readonly id: string;
  readonly migrations?: MigrationSource;
  readonly commandKinds?: readonly CommandKindDefinition[];
  readonly reconcilers?: Readonly<Record<string, Reconciler>>;
  readonly api?: Readonly<Record<string, ApiGroup>>;
  readonly findings?: FindingsProvider;
  readonly extensions?: readonly Extension[];
  readonly dependsOn?: readonly string[];
  /** Checks every command enqueued by anyone; throws to refuse it. */
  readonly commandPolicy?: CommandPolicy;
  /** Called once after migrations, before workers start. */
  readonly init?: (ctx: ModuleContext) => Promise<void> | void;
}
