import {
  type Command,
  type ComputeError,
  isComputeError,
  type ModuleContext,
  type NewCommand,
  type SqlExecutor,
} from '@better-compute/core';
import { type CommandStaging, commit } from '@better-compute/core/kernel';

// The gate of a step's one-statement send (core's `commit` change): it writes nothing itself, and holds while the
// worker holds its shard (the commit adds the fence and that the node exists to its guard).
const SEND_GATE = {
  name: 'step_send',
  sql: ({ guard }: { guard: string }) => `SELECT 1 AS sent WHERE ${guard}`,
};

/**
 * Sends a command now: in one statement (the command staged, fenced by the worker's lease) when the queue can stage
 * it; else (a command policy applies, its key got taken meanwhile, its node is missing, a queue without staging)
 * through `enqueue` in a transaction, which is find-before-create and runs the policies. A refusal is thrown. Returns
 * the command when `enqueue` wrote or found it, undefined when the one statement wrote it (it is `pending`).
 *
 * @example
 * ```ts
 * const found = await sendCommand(ctx, command);
 * ```
 */
export async function sendCommand(
  ctx: Pick<ModuleContext, 'sql' | 'clock' | 'commands' | 'events' | 'work' | 'item' | 'lease'>,
  command: NewCommand,
): Promise<Command | undefined> {
  if ((ctx.commands as Partial<CommandStaging>).stage) {
    const written = await commit(ctx, { changes: [SEND_GATE], command });
    if (written.status === 'committed') return undefined;
    if (written.status === 'refused') throw written.error;
  }
  return ctx.sql.transaction((tx) => ctx.commands.enqueue(tx, command));
}

/** How the end of a run wrote its last send: with the pass's requeue, alone (`sent`), none held, or refused. */
export type GateFinish = 'requeued' | 'sent' | 'none' | { readonly refused: ComputeError };

/**
 * Holds a control-plane step's last send until the run ends, so the statement that writes it also requeues the pass's
 * work item (no statement of the worker's after it). A send is held only while nothing else of the run reaches the
 * database: the step's `sql` (and so any commit or transaction it makes) writes the held send first, as does a second
 * send, so the run's writes keep their order. A run the engine stopped waiting for (its deadline, a stopping worker)
 * is closed: what it held is dropped unwritten, as if never sent (a later run sends it under its key).
 *
 * @example
 * ```ts
 * const gate = new RunGate(ctx);
 * const outcome = await runControlPlaneStep(ctx, steps, request, backoff, gate);
 * if (outcome.kind === 'not-ready' && (await gate.finish(at)) === 'requeued') return { ...result, requeueWritten: true };
 * ```
 */
export class RunGate {
  #held: NewCommand | undefined;
  #writing: Promise<void> = Promise.resolve();
  #closed = false;

  constructor(private readonly ctx: ModuleContext) {}

  /**
   * Holds `command` (already the step's own, checked) as the run's last send; false when it must be sent now. A send
   * held before it is written first (sends made at once, as `Promise.all` makes them, keep their order).
   */
  async hold(command: NewCommand): Promise<boolean> {
    // Only a queue that stages can put the send into one statement with the requeue.
    if (this.#closed || !(this.ctx.commands as Partial<CommandStaging>).stage) return false;
    // Synchronous from here on: two sends made at once must not both see nothing held.
    if (this.#held) this.#chain(this.#held);
    this.#held = command;
    return true;
  }

  /** Writes the held send, if any, before anything else of the run reaches the database. */
  flush(): Promise<void> {
    if (this.#held) this.#chain(this.#held);
    this.#held = undefined;
    return this.#writing;
  }

  // Queues a send's write after those before it. The chain is marked handled: a failed write is reported to whoever
  // waits on it (the run's next statement, `finish`), never as an unhandled rejection.
  #chain(command: NewCommand): void {
    const next = this.#writing.then(async () => {
      await sendCommand(this.ctx, command);
    });
    next.catch(() => undefined);
    this.#writing = next;
  }

  /** Drops what is held, unwritten, and holds nothing more. */
  close(): void {
    this.#held = undefined;
    this.#closed = true;
  }

  /**
   * Ends the run: writes the held send with the requeue of the pass's item at `requeueAt` in one statement
   * (`requeued`), or alone when there is no requeue to write or the one statement cannot carry it (`sent`, through
   * the send-now path); `none` when nothing was held. A send the queue refused, held or written earlier in the run, is
   * `{ refused }`: the step's own `awaitCommand` would have thrown it, so the engine fails the step with it (a run
   * that held it again and again would otherwise never meet it).
   */
  async finish(requeueAt: Date | undefined): Promise<GateFinish> {
    let refused: ComputeError | undefined;
    try {
      await this.#writing;
    } catch (error) {
      // A database error here failed the run's own statement that waited on it; only a refusal changes the step.
      if (isComputeError(error)) refused = error;
    }
    const command = this.#held;
    this.close();
    if (refused) return { refused };
    if (!command) return 'none';
    try {
      if (requeueAt !== undefined) {
        const written = await commit(this.ctx, { changes: [SEND_GATE], command, requeue: requeueAt });
        if (written.status === 'committed') return written.requeued ? 'requeued' : 'sent';
        if (written.status === 'refused') return { refused: written.error };
      }
      await sendCommand(this.ctx, command);
      return 'sent';
    } catch (error) {
      if (isComputeError(error)) return { refused: error };
      throw error;
    }
  }

  /** `sql` whose every statement (and transaction) first writes the held send. */
  guard(sql: SqlExecutor): SqlExecutor {
    return {
      query: async (text, params) => {
        await this.flush();
        return sql.query(text, params);
      },
      transaction: async (fn) => {
        await this.flush();
        return sql.transaction(fn);
      },
      // Notifications follow what was written, so the held send is already flushed by then.
      ...(sql.notifyAfterCommit
        ? { notifyAfterCommit: (notifications) => sql.notifyAfterCommit?.(notifications) ?? Promise.resolve() }
        : {}),
    };
  }
}
