import { recordAgentSessionWakes } from '../agents/session-wakes';
import { type ApiDispatcher, createApi } from '../api/dispatcher';
import { createFetchHandler } from '../api/fetch-handler';
import type { ApiGroup } from '../api/types';
import { type Clock, systemClock } from '../clock';
import { createCommandKindRegistry, createCommandQueue, type KernelCommandQueue } from '../commands';
import { ComputeError } from '../errors';
import { createEventBus, type KernelEventBus } from '../events';
import { applyMigrations, loadMigrations, readMigrationFolder } from '../migrations';
import { coreMigrationsFolder } from '../migrations-folder';
import type { AttestationPort } from '../ports/attestation';
import type { PkiPort } from '../ports/pki';
import type { QuorumPort } from '../ports/quorum';
import type { SecretBroker } from '../ports/secrets';
import type { SqlDatabase, SqlExecutor } from '../sql/executor';
import { createWorkQueue, runDueWork, startWorker } from '../work';
import { createCoreModule } from './core-module';
import { type Logger, silentLogger } from './logger';
import type { ComputeModule, ModuleContext, WorkflowsPort } from './module';
import { createModuleRegistry, type ModuleRegistry } from './registry';

/** What {@link betterCompute} takes. Everything but the modules has a default. */
export interface BetterComputeOptions {
  /** The store. Default: an in-memory PGlite, closed with `compute.close()`. */
  database?: SqlDatabase;
  modules?: readonly ComputeModule[];
  plugins?: readonly ComputeModule[];
  pki?: PkiPort;
  secrets?: SecretBroker;
  /** Verifies node-signed command results (`ctx.attestation`); pki's `attestation()` provides it. */
  attestation?: AttestationPort;
  /** The destructive-batch quorum (`ctx.quorum`); pki's `quorum()` provides it. */
  quorum?: QuorumPort;
  workflows?: WorkflowsPort;
  clock?: Clock;
  logger?: Logger;
  /** How many shards keys hash into. Fixed for the life of a database. Default 64. */
  shards?: number;
  /** Options of the workers `startWorkers` starts. */
  workers?: { concurrency?: number; leaseMs?: number; heartbeatMs?: number; pollMs?: number };
  /** Free-form configuration every module sees as `ctx.config`. */
  config?: Readonly<Record<string, unknown>>;
}

/** A running worker, as `startWorkers` returns it. */
export interface RunningWorker {
  readonly id: string;
  stop(): Promise<void>;
}

/** What {@link betterCompute} returns. */
export interface Compute {
  readonly database: SqlDatabase;
  readonly registry: ModuleRegistry;
  /** The events outbox: `compute.events.subscribe(handler, { tenantId })` hears every committed event. */
  readonly events: KernelEventBus;
  /** The context modules get; `context.sql` is the database. */
  readonly context: ModuleContext;
  /** The command queue with its agent-side functions (poll, ack, start, complete, fail, reject), which the agent API calls. */
  readonly commands: KernelCommandQueue;
  /** `compute.api.<group>.<method>(token, input)`. */
  readonly api: ApiDispatcher<Readonly<Record<string, ApiGroup>>>['api'];
  /** A fetch handler serving `POST /v1/<group>.<method>`. */
  readonly handler: (request: Request) => Promise<Response>;
  /** Starts `count` workers in this process; they share the shards with every other worker on the database. */
  startWorkers(count?: number): Promise<RunningWorker[]>;
  /** One pass over every due work item, without leases: for tests and single-process drivers. */
  runDueWork(options?: { limit?: number }): Promise<number>;
  /** Stops the workers, then closes the database if `betterCompute` opened it. */
  close(): Promise<void>;
}

const ROOT_TENANT = 'root';

/** The workflows port of the one module that provides it (the provision module), if any. */
function workflowsFromModules(modules: readonly ComputeModule[], ctx: ModuleContext): WorkflowsPort | undefined {
  const providers = modules.filter((module) => module.workflows !== undefined);
  if (providers.length > 1) {
    throw new ComputeError(
      'INVALID_CONFIG',
      `ctx.workflows is provided by both '${providers[0]?.id}' and '${providers[1]?.id}'`,
      { details: { path: ['modules'], modules: providers.map((module) => module.id) } },
    );
  }
  return providers[0]?.workflows?.(ctx);
}

/**
 * Composes the control plane: validates and registers every module and plugin (a duplicate id, extension, command
 * kind, reconciler or API group is `INVALID_CONFIG` naming both), applies every module's migrations, makes sure the
 * `root` tenant exists, and returns `compute`.
 *
 * @example
 * ```ts
 * import { betterCompute } from 'better-compute/core';
 * import { createPgliteDatabase } from 'better-compute/core/pglite';
 *
 * const compute = await betterCompute({ database: await createPgliteDatabase({ dataDir: './data' }), modules: [audit] });
 * const workers = await compute.startWorkers(2);
 * // …
 * await compute.close();
 * ```
 */
export async function betterCompute(options: BetterComputeOptions = {}): Promise<Compute> {
  if (typeof options !== 'object' || options === null) {
    throw new ComputeError('INVALID_CONFIG', 'betterCompute takes an options object', { details: { path: [] } });
  }
  // The core module's doctor runs over every registered module: it reads the registry once it exists.
  const registered: { modules: readonly ComputeModule[] } = { modules: [] };
  const coreModule = createCoreModule(() => registered.modules);
  const registry = createModuleRegistry({
    modules: [coreModule, ...(options.modules ?? [])],
    ...(options.plugins ? { plugins: options.plugins } : {}),
  });
  registered.modules = registry.modules;
  const shards = options.shards ?? 64;
  if (!Number.isInteger(shards) || shards < 1 || shards > 4096) {
    throw new ComputeError('INVALID_CONFIG', 'shards must be a whole number from 1 to 4096', {
      details: { path: ['shards'] },
    });
  }
  const clock = options.clock ?? systemClock;
  const log = options.logger ?? silentLogger;
  const kinds = createCommandKindRegistry(registry.commandKinds);

  const ownsDatabase = options.database === undefined;
  const database = options.database ?? (await (await import('../pglite/driver')).createPgliteDatabase());

  try {
    const migrations = [];
    for (const module of registry.modules) {
      const list =
        module === coreModule
          ? await readMigrationFolder(coreMigrationsFolder)
          : await loadMigrations(module.migrations);
      if (list.length > 0) migrations.push({ module: module.id, migrations: list });
    }
    await applyMigrations(database, migrations, clock);
    await database.query('INSERT INTO tenants (id, name, created_at) VALUES ($1, $1, $2) ON CONFLICT (id) DO NOTHING', [
      ROOT_TENANT,
      clock.now(),
    ]);
    await recordAgentSessionWakes(database, registry.agentSessionWakes, shards);
  } catch (err) {
    if (ownsDatabase) await database.close();
    throw err;
  }

  const work = createWorkQueue({ clock, shards, kinds: registry.reconcilers.keys() });
  const policies = registry.modules.flatMap((module) => (module.commandPolicy ? [module.commandPolicy] : []));
  const commands = createCommandQueue({ kinds, clock, work, policies });
  const events = createEventBus({ clock, db: database });
  const baseContext = (sql: SqlExecutor): ModuleContext => ({
    sql,
    clock,
    events,
    work,
    commands,
    commandKinds: kinds,
    log,
    config: options.config ?? {},
    ...(options.pki ? { pki: options.pki } : {}),
    ...(options.secrets ? { secrets: options.secrets } : {}),
    ...(options.attestation ? { attestation: options.attestation } : {}),
    ...(options.quorum ? { quorum: options.quorum } : {}),
  });
  const workflows = options.workflows ?? workflowsFromModules(registry.modules, baseContext(database));
  const makeContext = (sql: SqlExecutor): ModuleContext => ({
    ...baseContext(sql),
    ...(workflows ? { workflows } : {}),
  });
  const context = makeContext(database);
  try {
    for (const module of registry.modules) await module.init?.(context);
  } catch (err) {
    if (ownsDatabase) await database.close();
    throw err;
  }

  const dispatcher = createApi({ groups: registry.apiGroups, makeContext: () => context, sql: database });
  const running: RunningWorker[] = [];
  let closed = false;

  return {
    database,
    registry,
    events,
    context,
    commands,
    api: dispatcher.api,
    handler: createFetchHandler(dispatcher),
    async startWorkers(count = 1) {
      if (closed) throw new ComputeError('INVALID_STATE', 'compute is closed');
      const started: RunningWorker[] = [];
      for (let i = 0; i < count; i += 1) {
        const worker = await startWorker({
          db: database,
          clock,
          shards,
          reconcilers: registry.reconcilers,
          makeContext,
          log,
          ...options.workers,
        });
        started.push(worker);
        running.push(worker);
      }
      return started;
    },
    runDueWork: (runOptions = {}) =>
      runDueWork({ db: database, clock, reconcilers: registry.reconcilers, makeContext, ...runOptions }),
    async close() {
      if (closed) return;
      closed = true;
      await Promise.all(running.map((worker) => worker.stop()));
      if (ownsDatabase) await database.close();
    },
  };
}
