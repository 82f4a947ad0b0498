import {
  type Command,
  ComputeError,
  isComputeError,
  type ModuleContext,
  type NewCommand,
  type SqlExecutor,
} from '@better-compute/core';
import { type CommandStaging, type CommitChange, commit, type StagedWrite } from '@better-compute/core/kernel';

// The states in which a step may still send: a control-plane step runs as `running`; an agent step awaiting its
// node's rejoin is `waiting`.
const SENDING_STATES_SQL = "'running', 'waiting'";

/**
 * The gate of a step's one-statement send (core's `commit` change): it writes nothing itself, and holds while the
 * worker holds its shard (the commit adds the fence and that the node exists to its guard) and the sending step is
 * still running. It share-locks the step row, so an abort (which moves the step on, then cancels the step's open
 * commands, in one transaction) either waits for the send and cancels it, or is seen by it: a command is never sent
 * for a step already aborted.
 */
function sendGate(command: NewCommand): CommitChange {
  const { workflowId, stepId } = command;
  return {
    name: 'step_send',
    sql: ({ bind, guard }) =>
      workflowId && stepId
        ? `SELECT 1 AS sent FROM workflow_steps s WHERE s.workflow_id = ${bind(workflowId)}
             AND s.step_id = ${bind(stepId)} AND s.state IN (${SENDING_STATES_SQL}) AND ${guard} FOR SHARE OF s`
        : `SELECT 1 AS sent WHERE ${guard}`,
  };
}

/**
 * The step's row held (share-locked) in `tx` while it may still send; INVALID_STATE `step-ended` otherwise (aborted,
 * failed or settled meanwhile): the same check as the one-statement send's gate, for a send written in a transaction.
 */
async function holdSendingStep(tx: SqlExecutor, command: NewCommand): Promise<void> {
  const { workflowId, stepId } = command;
  if (!workflowId || !stepId) return;
  const { rowCount } = await tx.query(
    `SELECT 1 FROM workflow_steps WHERE workflow_id = $1 AND step_id = $2 AND state IN (${SENDING_STATES_SQL})
     FOR SHARE`,
    [workflowId, stepId],
  );
  if (rowCount === 0) {
    throw new ComputeError('INVALID_STATE', `step ${stepId} of workflow ${workflowId} is no longer running`, {
      details: { reason: 'step-ended', workflowId, stepId },
    });
  }
}

/** One command a step sends, and what is written with it (a staged write such as the join token it references). */
export interface StepSend {
  readonly command: NewCommand;
  readonly with_?: StagedWrite | undefined;
}

/** The commit of a group of sends: the step's gate, then what each carries, then the commands in order. */
function sendCommit(sends: readonly [StepSend, ...StepSend[]]) {
  const changes = [sendGate(sends[0].command), ...sends.flatMap((send) => send.with_?.changes ?? [])] as const;
  return { changes, commands: sends.map((send) => send.command) };
}

/**
 * Sends a step's commands now, together (one command, or a sequence whose later ones follow the earlier by
 * `afterKey`): in one statement (the commands staged, fenced by the worker's lease) when the queue can stage them;
 * else (a command policy applies, a key got taken meanwhile, the node is missing, a queue without staging) through
 * `enqueue` in one transaction, in order, which is find-before-create and runs the policies. What goes `with` a
 * command (a staged write, such as the join token a boot entry references) is written by the same statement or
 * transaction, and only when the command is sent by it (not when `enqueue` finds it sent). A refusal is thrown.
 * Returns the commands when `enqueue` wrote or found them, undefined when the one statement wrote them (`pending`).
 *
 * @example
 * ```ts
 * const found = await sendCommand(ctx, [{ command }]);
 * ```
 */
export async function sendCommand(
  ctx: Pick<ModuleContext, 'sql' | 'clock' | 'commands' | 'events' | 'work' | 'item' | 'lease'>,
  sends: readonly [StepSend, ...StepSend[]],
): Promise<Command[] | undefined> {
  if ((ctx.commands as Partial<CommandStaging>).stage) {
    const written = await commit(ctx, sendCommit(sends));
    if (written.status === 'committed') return undefined;
    if (written.status === 'refused') throw written.error;
  }
  return ctx.sql.transaction(async (tx) => {
    await holdSendingStep(tx, sends[0].command);
    const sent: Command[] = [];
    for (const { command, with_ } of sends) {
      // Written only with a command this transaction creates: a command already under the key had its own.
      const found = with_ ? await ctx.commands.findByKey(tx, command.nodeId, command.key) : undefined;
      if (!found) await with_?.write(tx);
      sent.push(found ?? (await ctx.commands.enqueue(tx, command)));
    }
    return sent;
  });
}

/**
 * How the end of a run wrote its last send: with the pass's requeue, alone (`sent`), none held, or refused; or
 * `superseded`: the step's deferred start found the workflow changed since it was planned, so nothing of the run was
 * written and the run's outcome is not the step's (the pass reads the workflow again).
 */
export type GateFinish = 'requeued' | 'sent' | 'none' | 'superseded' | { readonly refused: ComputeError };

/** How writing a step's deferred start went (provision's `commitPlan` result, as far as the gate reads it). */
export type StartWrite =
  | { readonly status: 'committed'; readonly revision: number; readonly requeued: boolean }
  | { readonly status: 'stale' }
  | { readonly status: 'needs-transaction' }
  | { readonly status: 'refused'; readonly error: ComputeError };

/**
 * Writes a step's start (its `running` mark and what the pass planned before it), with the run's held sends and the
 * pass's requeue in the same statement when given. Without them it must commit or find the plan stale.
 */
export type StartWriter = (extra: {
  readonly sends?: readonly [StepSend, ...StepSend[]];
  readonly requeue?: Date;
}) => Promise<StartWrite>;

function superseded(): ComputeError {
  return new ComputeError('INVALID_STATE', 'the workflow changed before this step run could start', {
    details: { reason: 'step-ended' },
  });
}

/**
 * Holds a control-plane step's last send until the run ends, so the statement that writes it also requeues the pass's
 * work item (no statement of the worker's after it). A send is held only while nothing else of the run reaches the
 * database: the step's `sql` (and so any commit or transaction it makes) writes the held send first, as does a second
 * send, so the run's writes keep their order. A run the engine stopped waiting for (its deadline, a stopping worker)
 * is closed: what it held is dropped unwritten, as if never sent (a later run sends it under its key).
 *
 * With a deferred `start`, the step is not marked `running` before its run: its start is written before anything of
 * the run reaches the database (its first statement, a send written now) or, when the run wrote nothing of its own,
 * by the statement that writes its held send and requeue, or before its settle. So a relaying step's start and its
 * send are one statement. The start is fenced by the revision the pass planned it from: when the workflow changed
 * meanwhile, nothing of the run is written (its statements fail INVALID_STATE `step-ended`) and `finish` says
 * `superseded`. A crash before the start leaves the step as it was, to be started again under the same key.
 *
 * @example
 * ```ts
 * const gate = new RunGate(ctx);
 * const outcome = await runControlPlaneStep(ctx, steps, request, backoff, gate);
 * if (outcome.kind === 'not-ready' && (await gate.finish(at)) === 'requeued') return { ...result, requeueWritten: true };
 * ```
 */
export class RunGate {
  #held: readonly [StepSend, ...StepSend[]] | undefined;
  #writing: Promise<void> = Promise.resolve();
  #closed = false;
  // The deferred start's writer, and whether the start is still to be written.
  readonly #writer: StartWriter | undefined;
  #start: boolean;
  #started: { readonly revision: number } | 'stale' | undefined;

  constructor(
    private readonly ctx: ModuleContext,
    start?: StartWriter,
  ) {
    this.#writer = start;
    this.#start = start !== undefined;
  }

  /**
   * The workflow's revision after the deferred start was written, `stale` when it found the workflow changed, undefined
   * when there was none to write (or it is not written yet).
   */
  get started(): { readonly revision: number } | 'stale' | undefined {
    return this.#started;
  }

  // Writes the deferred start (once), with what `extra` carries.
  async #writeStart(extra: Parameters<StartWriter>[0]): Promise<StartWrite> {
    const writer = this.#writer;
    if (!this.#start || !writer) throw new Error('the deferred start was written already');
    this.#start = false;
    const written = await writer(extra);
    if (written.status === 'committed') this.#started = { revision: written.revision };
    else if (written.status === 'stale') this.#started = 'stale';
    return written;
  }

  // The start written alone, if still deferred; a superseded start stops whatever of the run would follow it.
  async #ensureStarted(): Promise<void> {
    if (this.#start) {
      const written = await this.#writeStart({});
      if (written.status !== 'committed' && written.status !== 'stale') {
        throw new Error(`a step's start alone could not be written (${written.status})`);
      }
    }
    if (this.#started === 'stale') throw superseded();
  }

  /**
   * Holds `sends` (the step's own commands, checked: one, or a sequence) as the run's last send; false when they must
   * be sent now. A send held before it is written first (sends made at once, as `Promise.all` makes them, keep their
   * order).
   */
  async hold(sends: readonly [StepSend, ...StepSend[]]): Promise<boolean> {
    // Only a queue that stages can put the send into one statement with the requeue.
    if (this.#closed || !(this.ctx.commands as Partial<CommandStaging>).stage) return false;
    // Synchronous from here on: two sends made at once must not both see nothing held.
    if (this.#held) this.#chain(this.#held);
    this.#held = sends;
    return true;
  }

  /** Writes the held send, if any, before anything else of the run reaches the database. */
  flush(): Promise<void> {
    if (this.#held) this.#chain(this.#held);
    else if (this.#start || this.#started === 'stale') this.#chain(undefined);
    this.#held = undefined;
    return this.#writing;
  }

  // Queues a send's write (or only the deferred start's) after those before it. The chain is marked handled: a failed
  // write is reported to whoever waits on it (the run's next statement, `finish`), never as an unhandled rejection.
  #chain(held: readonly [StepSend, ...StepSend[]] | undefined): void {
    const next = this.#writing.then(async () => {
      await this.#ensureStarted();
      if (held) await sendCommand(this.ctx, held);
    });
    next.catch(() => undefined);
    this.#writing = next;
  }

  /** Drops what is held, unwritten, and holds nothing more (a deferred start is still written by `finish`). */
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
    const held = this.#held;
    this.close();
    if (this.#started === 'stale') return 'superseded';
    if (this.#start) {
      const started = await this.#finishStart(held, requeueAt);
      if (started !== undefined) return started;
    }
    if (refused) return { refused };
    if (!held) return 'none';
    try {
      if (requeueAt !== undefined) {
        const written = await commit(this.ctx, { ...sendCommit(held), requeue: requeueAt });
        if (written.status === 'committed') return written.requeued ? 'requeued' : 'sent';
        if (written.status === 'refused') return { refused: written.error };
      }
      await sendCommand(this.ctx, held);
      return 'sent';
    } catch (error) {
      if (isComputeError(error)) return { refused: error };
      throw error;
    }
  }

  /**
   * The deferred start with the held send and the requeue, by one statement; undefined when the send must still be
   * written the usual way (the one statement could not carry it, so the start went alone first).
   */
  async #finishStart(
    held: readonly [StepSend, ...StepSend[]] | undefined,
    requeueAt: Date | undefined,
  ): Promise<GateFinish | undefined> {
    const written = await this.#writeStart({
      ...(held ? { sends: held } : {}),
      ...(requeueAt !== undefined ? { requeue: requeueAt } : {}),
    });
    if (written.status === 'stale') return 'superseded';
    if (written.status === 'committed') {
      if (written.requeued) return 'requeued';
      return held ? 'sent' : 'none';
    }
    // A policy, a taken key or a refusal (nothing was written): the start alone, then the send as a step's send is
    // written otherwise.
    this.#start = true;
    try {
      await this.#ensureStarted();
    } catch (error) {
      if (this.#started === 'stale') return 'superseded';
      throw error;
    }
    if (written.status === 'refused') return { refused: written.error };
    return undefined;
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
