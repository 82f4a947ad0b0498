import type { QueryResult, Row, SqlExecutor, StagedCommand, StagedEvent } from '@better-compute/core';
import type { StepRecord, WorkflowRecord } from './workflow-rows';

/**
 * Thrown by a transition planned without a transaction when it needs one (to send or read a command, queue the
 * owner, set the host config): the reconciler writes what it planned before, then runs that transition in a
 * transaction of its own.
 */
export class NeedsTransaction extends Error {
  override readonly name = 'NeedsTransaction';
}

/**
 * The writes of one workflow's transitions, held so that one statement makes them all (see `flushWrites`): the
 * workflow row and the steps as they end up, and the events in order. It is the `tx` the transitions get: `updateStep`,
 * `updateWorkflow` and `publishWorkflowEvent` stage through it, and any other statement goes to `inner`, the
 * transaction it runs in. Planned without one (`inner` undefined), a transition that needs a statement of its own
 * throws {@link NeedsTransaction} before it changes anything.
 *
 * @example
 * ```ts
 * const staged = new StagedWrites(snapshot.workflow, undefined);
 * const decision = await advanceWorkflow(staged, env, snapshot, now);
 * await flushWrites(ctx.sql, staged, now, { revision: snapshot.workflow.revision, lease: leaseOf(ctx.sql) });
 * ```
 */
export class StagedWrites implements SqlExecutor {
  readonly steps = new Map<string, StepRecord>();
  readonly events: StagedEvent[] = [];
  workflowChanged = false;
  /** The one command these writes send (an agent step's), inserted by the same statement. */
  command: StagedCommand | undefined;

  /**
   * @param inner the transaction the writes run in; undefined when planning without one.
   * @param stageCommands whether a command may be staged rather than enqueued (planning only; off again after a
   *   staged command met one already under its key, so `commands.enqueue` finds that one).
   */
  constructor(
    readonly workflow: WorkflowRecord,
    private readonly inner: SqlExecutor | undefined,
    readonly stageCommands = inner === undefined,
  ) {}

  /** Whether nothing is staged. */
  get empty(): boolean {
    return !this.workflowChanged && this.steps.size === 0 && this.events.length === 0 && !this.command;
  }

  /** Throws {@link NeedsTransaction} when planning without a transaction. */
  requireTransaction(): void {
    if (!this.inner) throw new NeedsTransaction('this transition needs a transaction');
  }

  stageStep(step: StepRecord): void {
    this.steps.set(step.stepId, step);
  }

  stageWorkflow(workflow: WorkflowRecord): void {
    if (workflow !== this.workflow) throw new Error(`staged writes belong to workflow ${this.workflow.id}`);
    this.workflowChanged = true;
  }

  stageEvent(event: StagedEvent): void {
    this.events.push(event);
  }

  stageCommand(command: StagedCommand): void {
    if (this.command) throw new Error('one transition sends at most one command');
    this.command = command;
  }

  async query<R = Row>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
    this.requireTransaction();
    return (this.inner as SqlExecutor).query<R>(text, params);
  }

  async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    this.requireTransaction();
    return (this.inner as SqlExecutor).transaction(fn);
  }
}

/**
 * Says that a transition needs a transaction, before it changes anything: planned without one, it throws
 * {@link NeedsTransaction}; in a transaction (or with a plain executor) it does nothing.
 *
 * @example
 * ```ts
 * requireTransaction(tx); // sendAgentCommand enqueues a command next
 * ```
 */
export function requireTransaction(tx: SqlExecutor): void {
  if (tx instanceof StagedWrites) tx.requireTransaction();
}
