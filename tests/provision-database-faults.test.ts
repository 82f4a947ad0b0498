import { betterCompute, type Command, type Compute, isSqlError, type SqlDatabase } from 'better-compute/core';
import { openAgentSession, systemClock, touchAgentSession } from 'better-compute/core/kernel';
import { createPostgresDatabase } from 'better-compute/core/postgres';
import { type ProfileDefinition, provisionModule, storeProfile } from 'better-compute/provision';
import { insertNode, insertSite } from 'better-compute/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { labModule, labSteps } from './support/engine-lab';
import { type OwnedPostgres, postgresBinaries, startOwnedPostgres } from './support/owned-postgres';

// A database that fails under load: a PostgreSQL server of the test's own, restarted every few seconds while worker
// connections are terminated at random, under a few hundred workflows of control-plane, relaying and agent steps.
const WORKFLOWS = Number(process.env.FAULT_WORKFLOWS ?? 200);
const FAULT_MS = Number(process.env.FAULT_MS ?? 30_000);
// The longest a workflow may go without an event once the last fault is over (stated in the core README): one
// silent connection may cost a caller its answer limit (10 s here), and what it held is taken up at once after.
const STALL_BOUND_MS = 20_000;
const FINISH_BOUND_MS = 120_000;

const PROFILE: ProfileDefinition = {
  id: 'fault-run',
  version: 1,
  target: 'metal',
  steps: [
    { use: 'lab.dbFault' },
    { use: 'lab.relay', on: 'site', with: { key: 'wipe-a' } },
    { use: 'lab.ping', with: { n: 1 } },
    { use: 'lab.dbFault' },
    { use: 'lab.ping', with: { n: 2 } },
    { use: 'lab.relay', on: 'site', with: { key: 'wipe-b' } },
    { use: 'lab.ping', with: { n: 3 } },
    { use: 'lab.dbFault' },
    { use: 'lab.ping', with: { n: 4 } },
    { use: 'lab.relay', on: 'site', with: { key: 'wipe-c' } },
    { use: 'lab.ping', with: { n: 5 } },
    { use: 'lab.dbFault' },
  ],
};

const binaries = postgresBinaries();
if ('missing' in binaries) console.warn(`database fault test skipped: ${binaries.missing}`);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The test's own reads meet the faults too (a pooled connection killed while idle fails its next statement). */
async function retrying<T>(read: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await read();
    } catch (error) {
      if (attempt >= 10 || !isSqlError(error) || !error.retryable) throw error;
      await sleep(200);
    }
  }
}

/**
 * Agents as a real one behaves over a flaky network: every call may fail, and it calls again. Each command is
 * answered 0.5–3 s after it was created, all of a node's at once (the one site agent relays for every node); the
 * keys they were handed are recorded, to find a command sent twice.
 */
class StubbornAgents {
  readonly keysByCommand = new Map<string, string>();
  readonly #answerAt = new Map<string, number>();
  errors = 0;
  #stopped = false;
  #loops: Promise<void>[] = [];
  readonly #busy = new Set<string>();
  /** For a node whose agent call is under way: since when, and which call (to tell a hung call from a lost one). */
  readonly calls = new Map<string, { since: number; call: string }>();
  /** The last error of each node's agent calls, for a stuck workflow's report. */
  readonly lastErrors = new Map<string, string>();

  /** `db`: the agents' own pool, as remote agents share no connections with the control plane. */
  constructor(
    private readonly compute: Compute,
    private readonly db: SqlDatabase,
  ) {}

  start(): void {
    // A real agent's heartbeat does not wait for its commands: the sessions are touched on a loop of their own.
    this.#loops = [this.#every(50, () => this.#round()), this.#every(2_000, () => this.#touchAll())];
  }

  async #every(ms: number, fn: () => Promise<void>): Promise<void> {
    while (!this.#stopped) {
      try {
        await fn();
      } catch {
        this.errors += 1;
      }
      await sleep(ms);
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#loops);
  }

  async #touchAll(): Promise<void> {
    const db = this.db;
    const { rows } = await db.query<{ id: string }>('SELECT id FROM agent_sessions WHERE closed_at IS NULL');
    for (const row of rows)
      await db.transaction((tx) => touchAgentSession(tx, { sessionId: row.id, clock: systemClock }));
  }

  async #round(): Promise<void> {
    const db = this.db;
    const { rows } = await db.query<{ node_id: string }>(
      "SELECT DISTINCT node_id FROM commands WHERE state IN ('pending', 'dispatched', 'acked', 'running')",
    );
    // Every node's agent is on its own: one whose call is slow or stuck holds up nobody else.
    for (const { node_id: nodeId } of rows) {
      if (this.#busy.has(nodeId)) continue;
      this.#busy.add(nodeId);
      this.calls.set(nodeId, { since: Date.now(), call: 'serve' });
      void this.#serve(nodeId)
        .catch((error: unknown) => {
          this.errors += 1;
          this.lastErrors.set(nodeId, describeError(error));
        })
        .finally(() => {
          this.#busy.delete(nodeId);
          this.calls.delete(nodeId);
        });
    }
  }

  async #serve(nodeId: string): Promise<void> {
    const { commands } = this.compute;
    const db = this.db;
    const mark = (call: string) => this.calls.set(nodeId, { since: this.calls.get(nodeId)?.since ?? Date.now(), call });
    mark('poll');
    const polled = await db.transaction((tx) => commands.pollCommands(tx, { nodeId, limit: 100 }));
    mark('open');
    // A call that failed may have committed: what is open besides what the poll returned is taken up again.
    const { rows } = await db.query<{ id: string }>(
      "SELECT id FROM commands WHERE node_id = $1 AND state IN ('acked', 'running')",
      [nodeId],
    );
    const open: Command[] = [...polled];
    for (const row of rows) {
      const command = await commands.get(db, row.id);
      if (command) open.push(command);
    }
    mark('answer');
    await Promise.all(open.map((command) => this.#answer(nodeId, command)));
  }

  async #answer(nodeId: string, command: Command): Promise<void> {
    const { commands } = this.compute;
    const db = this.db;
    const known = this.keysByCommand.get(command.id);
    if (known === undefined) this.keysByCommand.set(command.id, `${command.nodeId}/${command.key}`);
    if (!this.#answerAt.has(command.id)) {
      this.#answerAt.set(command.id, command.createdAt.getTime() + 500 + Math.random() * 2_500);
    }
    if (Date.now() < (this.#answerAt.get(command.id) ?? 0)) return;
    const ref = { nodeId, commandId: command.id };
    const state = command.state;
    if (state === 'dispatched' || state === 'pending') await db.transaction((tx) => commands.ackCommand(tx, ref));
    if (state !== 'running') await db.transaction((tx) => commands.startCommand(tx, ref));
    await db.transaction((tx) => commands.completeCommand(tx, ref));
  }
}

describe.skipIf('missing' in binaries)('the engine on a PostgreSQL server that fails under load', () => {
  let server: OwnedPostgres;
  let db: SqlDatabase;
  let agentDb: SqlDatabase;
  let compute: Compute;
  let agents: StubbornAgents;
  const faults = { restarts: 0, terminated: 0, lastFaultEndedAt: 0 };

  beforeAll(async () => {
    server = await startOwnedPostgres((binaries as { bin: string }).bin);
    // The limits are what free a key whose connection went silent: at their defaults (60 s) they would be the stall,
    // so the test holds both pools to 5 s ones (a statement or an idle transaction; a silent connection after 10 s).
    db = createPostgresDatabase({
      url: server.url,
      max: 20,
      statementTimeoutMs: 5_000,
      idleInTransactionTimeoutMs: 5_000,
    });
    agentDb = createPostgresDatabase({
      url: server.url,
      max: 20,
      statementTimeoutMs: 5_000,
      idleInTransactionTimeoutMs: 5_000,
    });
    compute = await betterCompute({
      database: db,
      clock: systemClock,
      modules: [labModule, provisionModule({ steps: labSteps, profiles: [] })],
      workers: { concurrency: 16 },
      logger: {
        debug: () => undefined,
        info: () => undefined,
        warn: () => undefined,
        // An error the engine logs (a step that threw something unexpected) is what explains a failed workflow.
        error: (message, fields) => {
          if (message.startsWith('step')) console.log(`engine error: ${message} ${JSON.stringify(fields)}`);
        },
      },
    });
  }, 120_000);
  afterAll(async () => {
    await agents?.stop();
    await compute?.close();
    await db?.close();
    await agentDb?.close();
    await server?.destroy();
  });

  it('finishes every workflow, none failed by the faults, no command sent twice, no event missing, no long stall', async () => {
    const clock = systemClock;
    const siteId = await insertSite(db, {}, clock);
    const siteAgent = await insertNode(db, { siteId, kind: 'site-agent' }, clock);
    await db.transaction((tx) => openAgentSession(tx, { nodeId: siteAgent, role: 'site', bootId: 'site-boot', clock }));
    const nodes: string[] = [];
    for (let i = 0; i < WORKFLOWS + 1; i += 1) {
      const nodeId = await insertNode(db, { siteId }, clock);
      await db.transaction((tx) => openAgentSession(tx, { nodeId, role: 'node', bootId: `boot-${i}`, clock }));
      nodes.push(nodeId);
    }
    await db.transaction((tx) => storeProfile(tx, { tenantId: 'root', profile: PROFILE }, clock.now()));
    const start = (nodeId: string) =>
      db.transaction(async (tx) => {
        const started = await compute.context.workflows!.start(tx, {
          tenantId: 'root',
          profileId: PROFILE.id,
          profileVersion: PROFILE.version,
          nodeId,
        });
        return started.id;
      });
    agents = new StubbornAgents(compute, agentDb);
    agents.start();
    await compute.startWorkers(2);

    // The reference: one workflow run with no fault, for the events every run must write.
    const reference = await start(nodes[0] as string);
    await expect.poll(() => stateOf(db, reference), { timeout: 60_000, interval: 250 }).toBe('succeeded');
    const expectedEvents = await eventTypes(db, reference);

    const ids: string[] = [];
    for (const nodeId of nodes.slice(1)) ids.push(await start(nodeId));

    const faultStart = Date.now();
    let nextRestart = faultStart + 2_000 + Math.random() * 2_000;
    let mode: 'fast' | 'immediate' = 'immediate';
    // Faults go on for FAULT_MS, or until half the workflows have finished (after one restart at least): the rest are
    // in flight at the last fault, so what happens after it says something.
    let unfinishedAtLastFault = ids.length;
    while (Date.now() - faultStart < FAULT_MS && (faults.restarts === 0 || unfinishedAtLastFault > ids.length / 2)) {
      if (Date.now() >= nextRestart) {
        await server.restart(mode, 200 + Math.random() * 800);
        faults.restarts += 1;
        mode = mode === 'fast' ? 'immediate' : 'fast';
        nextRestart = Date.now() + 3_000 + Math.random() * 3_000;
      } else {
        faults.terminated += await server.terminate('better-compute', 0.3).catch(() => 0);
      }
      faults.lastFaultEndedAt = Date.now();
      unfinishedAtLastFault = await unfinished(db, ids).catch(() => unfinishedAtLastFault);
      await sleep(400 + Math.random() * 600);
    }

    // When a workflow stalls, what held it is usually a session idle in a transaction or waiting on a lock: say so.
    const diag = setInterval(() => {
      void db
        .query<{ pid: number; state: string; age: number; wait: string | null; query: string }>(
          "SELECT pid, state, extract(epoch FROM now() - coalesce(xact_start, query_start))::int AS age, wait_event_type || ':' || wait_event AS wait, left(regexp_replace(query, '\\s+', ' ', 'g'), 160) AS query FROM pg_stat_activity WHERE application_name = 'better-compute' AND pid <> pg_backend_pid() AND (state = 'idle in transaction' OR wait_event_type = 'Lock') AND now() - coalesce(xact_start, query_start) > interval '4 seconds'",
        )
        .then(({ rows }) => rows.length && console.log('sessions holding on:', JSON.stringify(rows)))
        .catch(() => undefined);
    }, 2_000);
    const deadline = Date.now() + FINISH_BOUND_MS;
    let open = ids.length;
    while (Date.now() < deadline) {
      open = await retrying(() => unfinished(db, ids));
      if (open === 0) break;
      await sleep(500);
    }
    const finishedAt = Date.now();
    if (open > 0) await reportStuck(db, ids, agents);
    await reportFailed(db, ids);
    clearInterval(diag);

    const { rows: states } = await retrying(() =>
      db.query<{ state: string; n: number }>(
        'SELECT state, count(*)::int AS n FROM workflows WHERE id = ANY($1::text[]) GROUP BY state',
        [ids],
      ),
    );
    const { rows: spent } = await retrying(() =>
      db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM workflow_steps WHERE workflow_id = ANY($1::text[]) AND attempt > 0',
        [ids],
      ),
    );
    const { rows: twice } = await retrying(() =>
      db.query<{ key: string }>(
        'SELECT node_id || $1 || key AS key FROM commands GROUP BY node_id, key HAVING count(*) > 1',
        ['/'],
      ),
    );
    const handedKeys = [...agents.keysByCommand.values()];
    const events = await Promise.all(ids.map((id) => retrying(() => eventTypes(db, id))));
    const missing = ids.filter((_, i) => JSON.stringify(events[i]) !== JSON.stringify(expectedEvents));
    const stall = await retrying(() => longestStallAfter(db, ids, faults.lastFaultEndedAt));

    const figures = {
      workflows: ids.length,
      faultSeconds: Math.round((faults.lastFaultEndedAt - faultStart) / 100) / 10,
      unfinishedAtLastFault,
      restarts: faults.restarts,
      connectionsTerminated: faults.terminated,
      agentCallErrors: agents.errors,
      finishedSecondsAfterLastFault: Math.round((finishedAt - faults.lastFaultEndedAt) / 100) / 10,
      longestStallAfterLastFaultMs: stall.ms,
      longestStallEndedWith: stall.before,
      commandsSent: handedKeys.length,
    };
    console.log(`database fault test: ${JSON.stringify(figures)}`);

    // A long wait after the faults: the workflow's own timeline says which side held it.
    if (stall.ms > 10_000) await reportStall(db, stall.subject, agents);

    expect(open).toBe(0);
    expect(states).toEqual([{ state: 'succeeded', n: ids.length }]);
    expect(spent[0]?.n).toBe(0);
    expect(twice).toEqual([]);
    expect(new Set(handedKeys).size).toBe(handedKeys.length);
    expect(missing).toEqual([]);
    expect(faults.restarts).toBeGreaterThan(0);
    expect(faults.terminated).toBeGreaterThan(0);
    expect(unfinishedAtLastFault).toBeGreaterThan(0);
    expect(stall.ms).toBeLessThanOrEqual(STALL_BOUND_MS);
  }, 300_000);
});

/** What a workflow that did not finish was doing, for the next person to read: its steps and its work item. */
async function reportStuck(db: SqlDatabase, ids: string[], agents: StubbornAgents): Promise<void> {
  const read = <R>(text: string, params: unknown[]) => retrying(() => db.query<R>(text, params)).then((r) => r.rows);
  const stuck = await read<{ id: string; node_id: string; state: string; revision: number }>(
    "SELECT id, node_id, state, revision FROM workflows WHERE id = ANY($1::text[]) AND state NOT IN ('succeeded', 'failed', 'cancelled') LIMIT 5",
    [ids],
  );
  for (const wf of stuck) {
    const steps = await read(
      'SELECT step_id, state, attempt, deadline, command_id FROM workflow_steps WHERE workflow_id = $1 AND state NOT IN ($2, $3) ORDER BY step_id',
      [wf.id, 'succeeded', 'pending'],
    );
    const items = await read(
      'SELECT kind, key, shard, not_before, claimed_by, attempts, last_error FROM work_items WHERE key = $1',
      [wf.node_id],
    );
    const commands = await read(
      "SELECT key, state, updated_at FROM commands WHERE workflow_id = $1 AND state NOT IN ('succeeded')",
      [wf.id],
    );
    const agentCall = agents.calls.get(wf.node_id);
    const agent = {
      call: agentCall ? { ...agentCall, forMs: Date.now() - agentCall.since } : null,
      lastError: agents.lastErrors.get(wf.node_id) ?? null,
    };
    console.log(`stuck workflow: ${JSON.stringify({ wf, steps, items, commands, agent, now: new Date() })}`);
  }
}

/** Why a workflow failed, when one did: its error and its failed steps' errors and events. */
async function reportFailed(db: SqlDatabase, ids: string[]): Promise<void> {
  const read = <R>(text: string, params: unknown[]) => retrying(() => db.query<R>(text, params)).then((r) => r.rows);
  const failed = await read<{ id: string; error: unknown }>(
    "SELECT id, error FROM workflows WHERE id = ANY($1::text[]) AND state = 'failed' LIMIT 5",
    [ids],
  );
  for (const wf of failed) {
    const steps = await read(
      "SELECT step_id, state, attempt, error FROM workflow_steps WHERE workflow_id = $1 AND state NOT IN ('succeeded', 'pending')",
      [wf.id],
    );
    const events = await read(
      "SELECT type, at, data FROM events WHERE subject = $1 AND type LIKE '%fail%' ORDER BY seq",
      [`workflow/${wf.id}`],
    );
    console.log(`failed workflow: ${JSON.stringify({ wf, steps, events })}`);
  }
}

/** The events and commands of the workflow that waited longest after the faults, with their times. */
async function reportStall(db: SqlDatabase, subject: string, agents: StubbornAgents): Promise<void> {
  const read = <R>(text: string, params: unknown[]) => retrying(() => db.query<R>(text, params)).then((r) => r.rows);
  const workflowId = subject.replace(/^workflow\//, '');
  const events = await read<{ at: Date; type: string; step: string | null }>(
    "SELECT at, type, data->>'stepId' AS step FROM events WHERE subject = $1 ORDER BY seq",
    [subject],
  );
  const commands = await read<{ key: string; state: string; created_at: Date; updated_at: Date; node_id: string }>(
    'SELECT key, state, created_at, updated_at, node_id FROM commands WHERE workflow_id = $1 ORDER BY created_at',
    [workflowId],
  );
  const nodes = new Set(commands.map((c) => c.node_id));
  const agentErrors = [...nodes].map((node) => ({ node, lastError: agents.lastErrors.get(node) ?? null }));
  console.log(`longest stall: ${JSON.stringify({ subject, events, commands, agentErrors })}`);
}

function describeError(error: unknown): string {
  if (isSqlError(error)) return `SqlError ${error.reason} ${error.sqlState ?? ''}: ${error.message}`;
  if (error instanceof Error) return `${error.name} ${(error as { code?: unknown }).code ?? ''}: ${error.message}`;
  return String(error);
}

async function unfinished(db: SqlDatabase, ids: string[]): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM workflows WHERE id = ANY($1::text[]) AND state NOT IN ('succeeded', 'failed', 'cancelled')",
    [ids],
  );
  return rows[0]?.n ?? 0;
}

async function stateOf(db: SqlDatabase, id: string): Promise<string | undefined> {
  const { rows } = await db.query<{ state: string }>('SELECT state FROM workflows WHERE id = $1', [id]);
  return rows[0]?.state;
}

async function eventTypes(db: SqlDatabase, id: string): Promise<string[]> {
  const { rows } = await db.query<{ type: string }>('SELECT type FROM events WHERE subject = $1 ORDER BY seq', [
    `workflow/${id}`,
  ]);
  return rows.map((r) => r.type);
}

/**
 * The longest any workflow went without an event after `since` (the end of the last fault), counting from `since`
 * to its first event after it, between its events, and (while it was unfinished) to now.
 */
async function longestStallAfter(
  db: SqlDatabase,
  ids: string[],
  since: number,
): Promise<{ ms: number; before: string; subject: string }> {
  const { rows } = await db.query<{ subject: string; at: Date; type: string; step: string | null }>(
    "SELECT subject, at, type, data->>'stepId' AS step FROM events WHERE subject = ANY($1::text[]) AND at > $2 ORDER BY subject, seq",
    [ids.map((id) => `workflow/${id}`), new Date(since)],
  );
  const bySubject = new Map<string, { at: number; label: string }[]>();
  for (const row of rows) {
    const list = bySubject.get(row.subject) ?? [];
    list.push({ at: row.at.getTime(), label: `${row.type}${row.step ? ` ${row.step}` : ''}` });
    bySubject.set(row.subject, list);
  }
  let longest = { ms: 0, before: '', subject: '' };
  for (const [subject, events] of bySubject) {
    let previous = since;
    for (const event of events) {
      if (event.at - previous > longest.ms) longest = { ms: event.at - previous, before: event.label, subject };
      previous = event.at;
    }
  }
  return longest;
}
