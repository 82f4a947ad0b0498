import type { Compute, SqlExecutor } from '@better-compute/core';

/** A command the agents picked up. */
interface Polled {
  id: string;
  nodeId: string;
  workflowId: string;
}

/** When a command's result was reported: the wall-clock time (ms) right after completeCommand's statement committed. */
export interface Completion {
  workflowId: string;
  completedAt: number;
}

// What pollCommands does to a node's pending commands (pending → dispatched, dispatched_at stamped), for every node at
// once: one statement instead of a transaction per node. Open commands past not_after are left to the kernel's sweep.
const POLL_SQL = `
UPDATE commands c SET state = 'dispatched', dispatched_at = $1, updated_at = $1
FROM (
  SELECT id FROM commands WHERE state = 'pending' AND kind = $2 AND not_after >= $1
  ORDER BY created_at, id LIMIT $3 FOR UPDATE SKIP LOCKED
) p
WHERE c.id = p.id
RETURNING c.id, c.node_id, c.workflow_id`;

// Each real agent polls its own node's commands through commands_node_state_idx; the one statement above stands for a
// thousand of those and would otherwise read every open command (commands_open_idx) to find the few pending ones, about
// 190 times a second. This index, on the bench's scratch database only, gives the bulk poll the same narrow read, so
// the stand-in for the agents does not take more of the server's CPU than the per-node polls it replaces.
const POLL_INDEX_SQL = `CREATE INDEX IF NOT EXISTS bench_pending_commands_idx ON commands (kind, created_at, id)
  WHERE state = 'pending'`;

/**
 * Creates the index the bulk poll reads (see POLL_INDEX_SQL), on a bench database, before the agents start.
 *
 * @example
 * ```ts
 * await createBulkPollIndex(aux);
 * ```
 */
export async function createBulkPollIndex(db: SqlExecutor): Promise<void> {
  await db.query(POLL_INDEX_SQL);
}

const POLL_LIMIT = 100;
const IDLE_POLL_MS = 5;

/**
 * The agents of every node at once, in process: one poller picks up every pending command of `kind` (of any node) in
 * bulk and `concurrency` runners answer them through the kernel's agent-side functions: ack, start and complete, each
 * committed on its own as the agent API's separate calls would be (each one statement; complete queues the wake in
 * its own); the commit time of the complete is recorded. With `thinkMs` 0 they answer as fast as they can; otherwise
 * each command is answered a random 0.5–1.5 × `thinkMs` after it was picked up, as a machine running it would (the
 * runners only carry the answers). It uses its own database handle (`db`), so none of its statements is counted
 * against the engine.
 */
export class BulkAgents {
  /** By command id. */
  readonly completed = new Map<string, Completion>();
  errors = 0;
  lastError: unknown;
  readonly #queue: Polled[] = [];
  readonly #waiters: ((command: Polled | undefined) => void)[] = [];
  #stopped = false;
  #loops: Promise<void>[] = [];

  constructor(
    private readonly db: SqlExecutor,
    private readonly compute: Compute,
    private readonly kind: string,
    private readonly concurrency: number,
    private readonly thinkMs = 0,
  ) {}

  readonly #thinking = new Set<NodeJS.Timeout>();

  start(): void {
    this.#loops = [this.#poll(), ...Array.from({ length: this.concurrency }, () => this.#run())];
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const timer of this.#thinking) clearTimeout(timer);
    this.#thinking.clear();
    for (const waiter of this.#waiters.splice(0)) waiter(undefined);
    await Promise.all(this.#loops);
  }

  /** Hands a picked-up command to the runners, at once or after its think time. */
  #pickedUp(command: Polled): void {
    if (this.thinkMs <= 0) {
      this.#put(command);
      return;
    }
    const timer = setTimeout(
      () => {
        this.#thinking.delete(timer);
        this.#put(command);
      },
      this.thinkMs * (0.5 + Math.random()),
    );
    this.#thinking.add(timer);
  }

  #put(command: Polled): void {
    const waiter = this.#waiters.shift();
    if (waiter) waiter(command);
    else this.#queue.push(command);
  }

  #take(): Promise<Polled | undefined> {
    const next = this.#queue.shift();
    if (next || this.#stopped) return Promise.resolve(next);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  async #poll(): Promise<void> {
    while (!this.#stopped) {
      if (this.#queue.length >= this.concurrency) {
        await sleep(1);
        continue;
      }
      try {
        const { rows } = await this.db.query<{ id: string; node_id: string; workflow_id: string }>(POLL_SQL, [
          new Date(),
          this.kind,
          POLL_LIMIT,
        ]);
        for (const row of rows) this.#pickedUp({ id: row.id, nodeId: row.node_id, workflowId: row.workflow_id });
        if (rows.length === 0) await sleep(IDLE_POLL_MS);
      } catch (err) {
        if (this.#stopped) return;
        this.errors += 1;
        this.lastError = err;
        await sleep(10);
      }
    }
  }

  async #run(): Promise<void> {
    const { commands } = this.compute;
    for (let command = await this.#take(); command; command = await this.#take()) {
      const ref = { nodeId: command.nodeId, commandId: command.id };
      try {
        // Each is one statement on a live command (complete queues the workflow's wake in it): no transaction around
        // them, as an agent API handler would not open one.
        await commands.ackCommand(this.db, ref);
        await commands.startCommand(this.db, ref);
        await commands.completeCommand(this.db, ref);
        this.completed.set(command.id, {
          workflowId: command.workflowId,
          completedAt: performance.timeOrigin + performance.now(),
        });
      } catch (err) {
        if (this.#stopped) return;
        this.errors += 1;
        this.lastError = err;
      }
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
