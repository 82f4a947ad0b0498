import {
  type BetterComputeOptions,
  betterCompute,
  type Compute,
  ComputeError,
  type ComputeModule,
  field,
  type Json,
  manifest,
  type SqlDatabase,
  SqlError,
} from 'better-compute/core';
import type { StagedWrite } from 'better-compute/core/kernel';
import {
  awaitCommand,
  awaitCommands,
  defineStep,
  getWorkflow,
  type Profile,
  type ProfileDefinition,
  type ProvisionModule,
  type ProvisionOptions,
  provisionModule,
  type Step,
  siteAgentFor,
  stepNotReady,
  storeProfile,
  type UserDataOptions,
  type WorkflowView,
} from 'better-compute/provision';
import {
  type CrashPlan,
  crashingDatabase,
  createFakeAgent,
  createFakeClock,
  type FakeAgent,
  type FakeClock,
  insertNode,
  insertSite,
  settle,
} from 'better-compute/testkit';

/** What the lab's steps did, for assertions; reset before every test. */
export interface LabRecord {
  runs: { action: string; stepId: string; attempt: number; idempotencyKey: string; workflowId: string }[];
  contexts: Record<string, unknown>[];
  owner: string[];
  /** `lab.flaky` fails while its attempt is below this. */
  flakyFailuresLeft: number;
  /** `lab.wait` throws stepNotReady until this is true. */
  ready: boolean;
  waitMs: number | undefined;
  /** `lab.throw` throws an Error with this message (never a ComputeError). */
  secret: string;
  /** `lab.hang` waits for its signal while this is true, and records that it saw the abort. */
  hangs: boolean;
  sawAbort: boolean;
  /** What `lab.duringRun` does while it runs (a verb on its own workflow, say); what it returns is the step's result. */
  duringRun: ((workflowId: string, attempt: number) => Promise<unknown>) | undefined;
  /**
   * `lab.dbFault` meets this many database faults before it gets through: `throw` throws a lost connection's SqlError,
   * `kill` has PostgreSQL end the step's own connection in the middle of its query, `unique` a non-retryable one.
   */
  dbFaultsLeft: number;
  dbFault: 'throw' | 'kill' | 'unique';
  /** `lab.stubborn` ignores its signal and waits for this to be called; then it tries to send a command. */
  releaseStubborn: (() => void) | undefined;
  stubbornSend: 'sent' | 'refused' | undefined;
}

/**
 * A staged write (`lab.relay`'s send, `lab.writeWith`'s result): counts itself in the node's `counter` label, and
 * requires that the node has no `refuse-with` label (`write` throws NOT_FOUND at `['nodeId']` then).
 */
function countedWrite(nodeId: string, counter: 'sent-with' | 'result-with'): StagedWrite {
  const count = (node: string, guard: string) =>
    `UPDATE nodes SET labels = labels || jsonb_build_object('${counter}', (COALESCE((labels->>'${counter}')::int, 0) + 1)::text)
     WHERE id = ${node} AND ${guard}`;
  const allowed = (node: string) => `EXISTS (SELECT 1 FROM nodes WHERE id = ${node} AND NOT labels ? 'refuse-with')`;
  return {
    changes: [
      {
        name: 'lab_counted',
        sql: ({ bind, guard }) => count(bind(nodeId), guard),
        requires: ({ bind }) => allowed(bind(nodeId)),
      },
    ],
    async write(tx) {
      const { rowCount } = await tx.query(count('$1', allowed('$1')), [nodeId]);
      if (rowCount === 0) throw new ComputeError('NOT_FOUND', 'the node refuses', { details: { path: ['nodeId'] } });
    },
  };
}

export const lab: LabRecord = {
  runs: [],
  contexts: [],
  owner: [],
  flakyFailuresLeft: 0,
  ready: false,
  waitMs: undefined,
  secret: 'hunter2',
  hangs: false,
  sawAbort: false,
  duringRun: undefined,
  dbFaultsLeft: 0,
  dbFault: 'throw',
  releaseStubborn: undefined,
  stubbornSend: undefined,
};

function record(action: string, ctx: { stepId: string; attempt: number; idempotencyKey: string; workflowId: string }) {
  lab.runs.push({
    action,
    stepId: ctx.stepId,
    attempt: ctx.attempt,
    idempotencyKey: ctx.idempotencyKey,
    workflowId: ctx.workflowId,
  });
}

const empty = manifest({});
const payload = manifest({ n: field.int().optional() });

export const labSteps = [
  defineStep({
    id: 'lab.noop',
    runsOn: 'control-plane',
    timeout: '1m',
    retrySafe: true,
    input: manifest({ tag: field.string().optional() }),
    async run(input, ctx) {
      record('lab.noop', ctx);
      return { ok: true, tag: input.tag ?? null };
    },
  }),
  defineStep({
    // Sets a label on the node, as an inspection step does from what it found.
    id: 'lab.label',
    runsOn: 'control-plane',
    timeout: '1m',
    retrySafe: true,
    input: manifest({ key: field.string(), value: field.string() }),
    async run(input, ctx) {
      record('lab.label', ctx);
      await ctx.sql.query('UPDATE nodes SET labels = labels || jsonb_build_object($2::text, $3::text) WHERE id = $1', [
        ctx.node?.id,
        input.key,
        input.value,
      ]);
      return { labelled: input.key };
    },
  }),
  defineStep({
    id: 'lab.duringRun',
    runsOn: 'control-plane',
    timeout: '1m',
    retrySafe: true,
    input: empty,
    async run(_input, ctx) {
      record('lab.duringRun', ctx);
      return ((await lab.duringRun?.(ctx.workflowId, ctx.attempt)) ?? null) as Json;
    },
  }),
  defineStep({
    id: 'lab.writeWith',
    runsOn: 'control-plane',
    timeout: '1m',
    retrySafe: true,
    input: manifest({
      // Fails the run after it asked for the write.
      fail: field.boolean().optional(),
      // A run after the first clears the node's `refuse-with` label before it asks for the write.
      clearRefusal: field.boolean().optional(),
    }),
    async run(input, ctx) {
      record('lab.writeWith', ctx);
      const runs = lab.runs.filter((r) => r.action === 'lab.writeWith' && r.workflowId === ctx.workflowId).length;
      if (input.clearRefusal && runs > 1) {
        await ctx.sql.query(`UPDATE nodes SET labels = labels - 'refuse-with' WHERE id = $1`, [ctx.node!.id]);
      }
      await lab.duringRun?.(ctx.workflowId, ctx.attempt);
      ctx.writeWithResult?.(countedWrite(ctx.node!.id, 'result-with'));
      if (input.fail) throw new ComputeError('DRIVER_ERROR', 'the write was asked for, then the run failed');
      return { runs };
    },
  }),
  defineStep({
    id: 'lab.labelWith',
    runsOn: 'control-plane',
    timeout: '1m',
    retrySafe: true,
    input: manifest({ label: field.string() }),
    async run(input, ctx) {
      record('lab.labelWith', ctx);
      const nodeId = ctx.node!.id;
      // As inspect.collect writes its labels: whole, from the node as read, only while the node is still that version.
      const { rows } = await ctx.sql.query<{ labels: Record<string, string>; version: string }>(
        'SELECT labels, xmin::text AS version FROM nodes WHERE id = $1',
        [nodeId],
      );
      const read = rows[0]!;
      await lab.duringRun?.(ctx.workflowId, ctx.attempt);
      const labels = { ...read.labels, [input.label]: 'yes' };
      const update = (bind: (value: unknown) => string, guard: string) =>
        `UPDATE nodes SET labels = ${bind(JSON.stringify(labels))}::jsonb WHERE id = ${bind(nodeId)} AND ${guard}`;
      ctx.writeWithResult?.({
        changes: [
          {
            name: 'lab_labelled',
            sql: ({ bind, guard }) => update(bind, guard),
            requires: ({ bind }) =>
              `EXISTS (SELECT 1 FROM nodes WHERE id = ${bind(nodeId)} AND xmin::text = ${bind(read.version)} FOR UPDATE)`,
          },
        ],
        leaves: { nodeLabels: labels },
        async write(tx) {
          const params: unknown[] = [];
          const bind = (value: unknown) => `$${params.push(value)}`;
          await tx.query(update(bind, `xmin::text = ${bind(read.version)}`), params);
        },
      });
      return { labels };
    },
  }),
  defineStep({
    id: 'lab.inspect',
    runsOn: 'control-plane',
    timeout: '1m',
    retrySafe: true,
    input: manifest({ port: field.int({ min: 1, max: 65535 }).default(50000) }),
    async run(input, ctx) {
      record('lab.inspect', ctx);
      // A transaction of its own succeeds only if none is open on the connection (PGlite would refuse it).
      const inside = await ctx.sql.transaction(
        async (tx) => (await tx.query<{ one: number }>('SELECT 1 AS one')).rows[0]?.one,
      );
      lab.contexts.push({
        workflowId: ctx.workflowId,
        stepId: ctx.stepId,
        attempt: ctx.attempt,
        idempotencyKey: ctx.idempotencyKey,
        node: ctx.node ?? null,
        tenantId: ctx.tenantId,
        batchId: ctx.batchId ?? null,
        signalAborted: ctx.signal.aborted,
        inside,
        workflow: {
          profile: `${ctx.workflow.profile.id}@${ctx.workflow.profile.version}`,
          steps: ctx.workflow.profile.steps?.length ?? 0,
          owner: ctx.workflow.owner,
          startedAt: ctx.workflow.startedAt.toISOString(),
        },
      });
      return { port: input.port };
    },
  }),
  defineStep({
    id: 'lab.flaky',
    runsOn: 'control-plane',
    timeout: '1m',
    retries: 2,
    retrySafe: true,
    input: empty,
    async run(_input, ctx) {
      record('lab.flaky', ctx);
      if (lab.flakyFailuresLeft > 0) {
        lab.flakyFailuresLeft -= 1;
        throw new ComputeError('DRIVER_ERROR', 'the BMC did not answer');
      }
      return { attempt: ctx.attempt };
    },
  }),
  defineStep({
    id: 'lab.wait',
    runsOn: 'control-plane',
    timeout: '1m',
    retrySafe: true,
    input: empty,
    async run(_input, ctx) {
      record('lab.wait', ctx);
      if (!lab.ready) throw lab.waitMs === undefined ? stepNotReady() : stepNotReady(lab.waitMs);
      return { ready: true };
    },
  }),
  defineStep({
    id: 'lab.throw',
    runsOn: 'control-plane',
    timeout: '1m',
    retrySafe: true,
    input: empty,
    async run(_input, ctx) {
      record('lab.throw', ctx);
      throw new Error(`connection to postgres://admin:${lab.secret}@db failed`);
    },
  }),
  defineStep({
    id: 'lab.hang',
    runsOn: 'control-plane',
    timeout: '1m',
    retrySafe: true,
    input: empty,
    async run(_input, ctx) {
      record('lab.hang', ctx);
      if (!lab.hangs) return { hung: false };
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
      lab.sawAbort = true;
      throw new ComputeError('INTERNAL', 'interrupted');
    },
  }),
  defineStep({
    id: 'lab.dbFault',
    runsOn: 'control-plane',
    timeout: '1m',
    retrySafe: true,
    input: empty,
    async run(_input, ctx) {
      record('lab.dbFault', ctx);
      if (lab.dbFaultsLeft > 0) {
        lab.dbFaultsLeft -= 1;
        if (lab.dbFault === 'kill') await ctx.sql.query('SELECT pg_terminate_backend(pg_backend_pid())');
        const reason = lab.dbFault === 'unique' ? 'unique-violation' : 'connection-lost';
        throw new SqlError('the database went away', { reason, cause: undefined });
      }
      const { rows } = await ctx.sql.query<{ one: number }>('SELECT 1 AS one');
      return { one: rows[0]?.one ?? null };
    },
  }),
  defineStep({
    // Ignores its signal: waits for the test, then tries to send a command as if nothing happened.
    id: 'lab.stubborn',
    runsOn: 'control-plane',
    sends: ['lab.ping'],
    timeout: '1500ms',
    retrySafe: true,
    input: empty,
    async run(_input, ctx) {
      record('lab.stubborn', ctx);
      await new Promise<void>((resolve) => {
        lab.releaseStubborn = resolve;
      });
      try {
        await awaitCommand(ctx, { nodeId: ctx.node!.id, kind: 'lab.ping', payload: {} });
        lab.stubbornSend = 'sent';
      } catch {
        lab.stubbornSend = 'refused';
      }
      return null;
    },
  }),
  defineStep({
    id: 'lab.relay',
    runsOn: 'control-plane',
    relays: ['site'],
    // lab.unregistered is declared but registered by no module: the command queue refuses it.
    sends: ['lab.wipe', 'lab.unregistered'],
    timeout: '20m',
    retrySafe: true,
    input: manifest({
      key: field.string().optional(),
      pollMs: field.number().optional(),
      kind: field.string().optional(),
      // Runs `lab.duringRun`'s hook first (an abort of its own workflow, say).
      hookFirst: field.boolean().optional(),
      // Sends the command with a staged write (see sentWith): the node's `sent-with` label counts the writes.
      withWrite: field.boolean().optional(),
      // Relays to this agent without a statement of its own first (as metal's steps do, from the claim's reads).
      siteAgentId: field.string().optional(),
      // Reads its own step's state first and records it in `lab.contexts`.
      readOwnState: field.boolean().optional(),
    }),
    async run(input, ctx) {
      record('lab.relay', ctx);
      if (input.hookFirst) await lab.duringRun?.(ctx.workflowId, ctx.attempt);
      if (input.readOwnState) {
        const { rows } = await ctx.sql.query<{ state: string }>(
          'SELECT state FROM workflow_steps WHERE workflow_id = $1 AND step_id = $2',
          [ctx.workflowId, ctx.stepId],
        );
        lab.contexts.push({ ownState: rows[0]?.state ?? null });
      }
      const agent = input.siteAgentId
        ? { nodeId: input.siteAgentId }
        : await siteAgentFor(ctx.sql, ctx.node!.id, ctx.clock);
      if (!agent) throw stepNotReady(2_000);
      const sent = await awaitCommand(ctx, {
        nodeId: agent.nodeId,
        kind: input.kind ?? 'lab.wipe',
        payload: {},
        ...(input.key ? { key: input.key } : {}),
        ...(input.pollMs !== undefined ? { pollMs: input.pollMs } : {}),
        ...(input.withWrite ? { with: countedWrite(ctx.node!.id, 'sent-with') } : {}),
        targetNodeId: ctx.node!.id,
      });
      return { commandId: sent.commandId };
    },
  }),
  defineStep({
    id: 'lab.sendThenRead',
    runsOn: 'control-plane',
    relays: ['site'],
    sends: ['lab.wipe'],
    timeout: '20m',
    retrySafe: true,
    input: empty,
    async run(_input, ctx) {
      record('lab.sendThenRead', ctx);
      const agent = await siteAgentFor(ctx.sql, ctx.node!.id, ctx.clock);
      if (!agent) throw stepNotReady(2_000);
      const input = { nodeId: agent.nodeId, kind: 'lab.wipe', payload: {}, targetNodeId: ctx.node!.id };
      // Two sends, then a read of what they wrote: each must be in the database before what follows it.
      const sends = await Promise.allSettled([
        awaitCommand(ctx, { ...input, key: 'a' }),
        awaitCommand(ctx, { ...input, key: 'b' }),
      ]);
      const { rows } = await ctx.sql.query<{ key: string }>(
        'SELECT key FROM commands WHERE workflow_id = $1 ORDER BY key',
        [ctx.workflowId],
      );
      lab.contexts.push({ seen: rows.map((r) => r.key.split(':').at(-1)) });
      if (sends.some((s) => s.status === 'rejected')) throw stepNotReady(2_000);
      return { seen: rows.length };
    },
  }),
  defineStep({
    id: 'lab.sequence',
    runsOn: 'control-plane',
    relays: ['site'],
    sends: ['lab.wipe'],
    timeout: '20m',
    retrySafe: true,
    input: manifest({ quietLast: field.boolean().optional() }),
    async run(input, ctx) {
      record('lab.sequence', ctx);
      const agent = await siteAgentFor(ctx.sql, ctx.node!.id, ctx.clock);
      if (!agent) throw stepNotReady(2_000);
      const one = { nodeId: agent.nodeId, kind: 'lab.wipe', payload: {}, targetNodeId: ctx.node!.id, pollMs: 30_000 };
      const sent = await awaitCommands(ctx, [
        { ...one, key: 'one' },
        { ...one, key: 'two', with: countedWrite(ctx.node!.id, 'sent-with') },
        { ...one, key: 'three', ...(input.quietLast ? { wakeOn: 'failure' as const } : {}) },
      ]);
      return { commands: sent.map((command) => command.commandId) };
    },
  }),
  defineStep({
    id: 'lab.undeclared',
    runsOn: 'control-plane',
    sends: ['lab.ping'],
    timeout: '1m',
    retrySafe: true,
    input: empty,
    async run(_input, ctx) {
      record('lab.undeclared', ctx);
      await awaitCommand(ctx, { nodeId: ctx.node!.id, kind: 'lab.wipe', payload: {} });
      return null;
    },
  }),
  defineStep({
    id: 'lab.ping',
    runsOn: 'node',
    command: 'lab.ping',
    timeout: '5m',
    retrySafe: true,
    input: payload,
  }),
  defineStep({
    id: 'lab.wipeDisks',
    runsOn: 'ramdisk',
    command: 'lab.wipe',
    timeout: '5m',
    retrySafe: false,
    input: empty,
  }),
  defineStep({
    id: 'lab.sitePing',
    runsOn: 'site',
    command: 'lab.ping',
    timeout: '5m',
    retrySafe: true,
    input: payload,
  }),
  defineStep({
    id: 'lab.reboot',
    runsOn: 'node',
    command: 'lab.reboot',
    await: 'rejoin',
    timeout: '15m',
    retrySafe: false,
    input: empty,
  }),
  defineStep({
    id: 'lab.mount',
    runsOn: 'control-plane',
    timeout: '1m',
    retrySafe: true,
    input: empty,
    cleanup: [
      { use: 'lab.noop', with: { tag: 'unmount-1' } },
      { use: 'lab.noop', with: { tag: 'unmount-2' } },
    ],
    async run(_input, ctx) {
      record('lab.mount', ctx);
      return null;
    },
  }),
];

/** Command kinds, the owner reconciler and a driver.invoke kind, as metal would register them. */
export const labModule: ComputeModule = {
  id: 'lab',
  commandKinds: [
    { name: 'lab.ping', payload },
    { name: 'lab.wipe', payload: empty, destructive: true },
    { name: 'lab.reboot', payload: empty, destructive: true, selfTerminating: true },
    {
      name: 'driver.invoke',
      payload: manifest({ operation: field.string(), driver: field.json(), input: field.json() }),
      destructive: true,
    },
  ],
  reconcilers: {
    'lab.owner': async (key) => {
      lab.owner.push(key);
    },
  },
};

/** One compute on one database for a whole test file, reset before each test. */
export interface EngineLab {
  compute: Compute;
  /** The provision module the lab runs (its engine, images and findings). */
  provision: ProvisionModule;
  db: SqlDatabase;
  clock: FakeClock;
  siteId: string;
  nodeId: string;
  /** The node's own agent (`node` role) and the site agent; both connected after reset. */
  nodeAgent: FakeAgent;
  siteAgent: FakeAgent;
  agents: FakeAgent[];
  /** Stores a profile under `root` (or `tenantId`) and starts a workflow on the node. */
  start(
    profile: Omit<ProfileDefinition, 'version' | 'target'> & Partial<ProfileDefinition>,
    options?: { owner?: string; nodeId?: string; batchId?: string },
  ): Promise<string>;
  settle(): Promise<void>;
  workflow(id: string): Promise<WorkflowView>;
  eventTypes(id: string): Promise<string[]>;
  reset(options?: { labels?: Record<string, string> }): Promise<void>;
  close(): Promise<void>;
}

const TABLES =
  'userdata_renders, images, workflow_steps, workflows, profiles, commands, work_items, events, agent_sessions, nodes, sites';

/** What {@link createEngineLab} takes besides the database; everything is optional. */
export interface EngineLabOptions {
  clock?: FakeClock;
  /** Modules registered after provision (the pki module, …). */
  modules?: ComputeModule[];
  profiles?: readonly Profile[];
  /** provisionModule's `userData`. */
  userData?: UserDataOptions;
  /** Plugin modules listed in provisionModule({ modules }) as well as in betterCompute's (their extensions borrowed). */
  pluginModules?: ComputeModule[];
  /** Steps registered besides the lab's (a plugin's). */
  steps?: readonly Step[];
  /** More provisionModule options: `configUnits`, `imageVerifier`. */
  provision?: Pick<ProvisionOptions, 'configUnits' | 'imageVerifier'>;
  /** More betterCompute options: the pki and secrets ports, a logger. */
  kernel?: Pick<BetterComputeOptions, 'pki' | 'secrets' | 'logger'>;
}

/**
 * Builds the lab on a database: provision with the lab steps, the lab module, a fake clock.
 */
export async function createEngineLab(db: SqlDatabase, options: EngineLabOptions = {}): Promise<EngineLab> {
  const clock = options.clock ?? createFakeClock();
  const extraModules = options.modules ?? [];
  const provision = provisionModule({
    ...options.provision,
    steps: [...labSteps, ...(options.steps ?? [])],
    profiles: options.profiles ?? [],
    ...(options.userData ? { userData: options.userData } : {}),
    ...(options.pluginModules ? { modules: options.pluginModules } : {}),
  });
  const compute = await betterCompute({
    ...options.kernel,
    database: db,
    clock,
    modules: [labModule, provision, ...extraModules, ...(options.pluginModules ?? [])],
  });
  const state = {
    siteId: '',
    nodeId: '',
    nodeAgent: undefined as unknown as FakeAgent,
    siteAgent: undefined as unknown as FakeAgent,
  };
  const labApi: EngineLab = {
    compute,
    provision,
    db,
    clock,
    get siteId() {
      return state.siteId;
    },
    get nodeId() {
      return state.nodeId;
    },
    get nodeAgent() {
      return state.nodeAgent;
    },
    get siteAgent() {
      return state.siteAgent;
    },
    get agents() {
      return [state.nodeAgent, state.siteAgent];
    },
    async reset(options = {}) {
      await db.query(`TRUNCATE ${TABLES} CASCADE`);
      Object.assign(lab, {
        runs: [],
        contexts: [],
        owner: [],
        flakyFailuresLeft: 0,
        ready: false,
        waitMs: undefined,
        hangs: false,
        sawAbort: false,
        duringRun: undefined,
        dbFaultsLeft: 0,
        dbFault: 'throw',
        releaseStubborn: undefined,
        stubbornSend: undefined,
      });
      state.siteId = await insertSite(db, {}, clock);
      state.nodeId = await insertNode(db, { siteId: state.siteId, labels: options.labels ?? {} }, clock);
      const siteAgentNode = await insertNode(db, { siteId: state.siteId, kind: 'site-agent' }, clock);
      state.nodeAgent = createFakeAgent(compute, { nodeId: state.nodeId, role: 'node' });
      state.siteAgent = createFakeAgent(compute, { nodeId: siteAgentNode, role: 'site' });
      await state.nodeAgent.connect();
      await state.siteAgent.connect();
      // Connecting queued a pass of each node's workflow (provision's wakeOnAgentSession), with none to run yet: a
      // test starts with an empty queue, so the boundaries the crash tests count are those of its own work.
      await db.query("DELETE FROM work_items WHERE kind = 'workflow'");
    },
    async start(profile, options = {}) {
      const document = { version: 1, target: 'metal', ...profile } as ProfileDefinition;
      return db.transaction(async (tx) => {
        await storeProfile(tx, { tenantId: 'root', profile: document }, clock.now());
        const started = await compute.context.workflows!.start(tx, {
          tenantId: 'root',
          profileId: document.id,
          profileVersion: document.version,
          nodeId: options.nodeId ?? state.nodeId,
          ...(options.owner ? { owner: options.owner } : {}),
          ...(options.batchId ? { batchId: options.batchId } : {}),
        });
        return started.id;
      });
    },
    async settle() {
      await settle(compute, { clock, agents: [state.nodeAgent, state.siteAgent] });
    },
    workflow: (id) => getWorkflow(db, { workflowId: id }),
    async eventTypes(id) {
      const { rows } = await db.query<{ type: string }>('SELECT type FROM events WHERE subject = $1 ORDER BY seq', [
        `workflow/${id}`,
      ]);
      return rows.map((r) => r.type);
    },
    close: () => compute.close(),
  };
  return labApi;
}

/** The states of a workflow's steps, `stepId:state`. */
export function stepStates(workflow: WorkflowView): string[] {
  return workflow.steps.map((s) => `${s.stepId}:${s.state}`);
}

/** A result as JSON, for comparing. */
export function json(value: unknown): Json {
  return JSON.parse(JSON.stringify(value)) as Json;
}

/**
 * A second lab on the same database whose worker dies at the `at`-th transaction boundary after its own start-up
 * (migrations and module init are counted first and skipped).
 */
export async function createCrashingLab(
  db: SqlDatabase,
  clock: FakeClock,
  at: number,
  when: CrashPlan['when'],
  options: Omit<EngineLabOptions, 'clock'> = {},
): Promise<EngineLab> {
  const counting = crashingDatabase(db, undefined);
  const counter = await createEngineLab(counting, { ...options, clock });
  const startup = counting.boundaries;
  await counter.close();
  return createEngineLab(crashingDatabase(db, { at: startup + at, when }), { ...options, clock });
}
