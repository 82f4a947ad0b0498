import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { Json } from '../json/types';
import type { SqlExecutor } from '../sql/executor';
import type { StagedCommand } from './staged-command';

/**
 * The channel a new command's NOTIFY goes to, its payload the node id: `commands.enqueue` and `commit`'s staged
 * command send it in the statement that inserts the command, so it is delivered at commit. The agent API listens to
 * wake a long poll at once; polling stays the floor, so nothing depends on a notification.
 *
 * @example
 * ```ts
 * await db.listen(COMMANDS_CHANNEL, (nodeId) => wakePollsOf(nodeId));
 * ```
 */
export const COMMANDS_CHANNEL = 'bc_commands';

/** Command states. `pending → dispatched → acked → running → succeeded | failed`; also rejected, expired, cancelled. */
export type CommandState =
  | 'pending'
  | 'dispatched'
  | 'acked'
  | 'running'
  | 'succeeded'
  | 'failed'
  | 'rejected'
  | 'expired'
  | 'cancelled';

/**
 * A command kind a module registers: its dotted name, the payload's schema (a manifest or any Standard Schema; its
 * output is the proto3 JSON payload), whether it is destructive (wipes, power, boot changes) and whether it ends the
 * process that runs it.
 *
 * @example
 * ```ts
 * const kexec: CommandKindDefinition = { name: 'boot.kexec', payload: manifest({ kernel: field.string() }), destructive: true, selfTerminating: true };
 * ```
 */
export interface CommandKindDefinition {
  readonly name: string;
  readonly payload: StandardSchemaV1;
  readonly destructive?: boolean;
  readonly selfTerminating?: boolean;
  readonly description?: string;
}

/** A command to an agent, as stored. */
export interface Command {
  id: string;
  tenantId: string;
  nodeId: string;
  kind: string;
  payload: Json;
  key: string;
  state: CommandState;
  notAfter: Date;
  batchId?: string;
  workflowId?: string;
  stepId?: string;
  targetNodeId?: string;
  result?: Uint8Array;
  attested?: Json;
  reason?: string;
  /** The work item queued in the transaction that settles the command. */
  wake?: { kind: string; key: string };
  /** `'failure'`: only an end other than `succeeded` queues the wake. */
  wakeOn?: CommandWakeOn;
  /** The key of the command (same node) this one waits for: it is dispatched only once that one has succeeded. */
  afterKey?: string;
  createdAt: Date;
  updatedAt: Date;
  dispatchedAt?: Date;
  finishedAt?: Date;
}

/** What enqueueing a command takes. `wake` is a work item queued in the transaction that settles the command. */
export interface NewCommand {
  nodeId: string;
  kind: string;
  payload: Json;
  key: string;
  notAfter: Date;
  batchId?: string;
  workflowId?: string;
  stepId?: string;
  targetNodeId?: string;
  wake?: { kind: string; key: string };
  /**
   * Which ends queue `wake`: every end (`'settle'`, the default) or only a failed, rejected, expired or cancelled one
   * (`'failure'`), for a command whose success its waiter does not wait on (a power cycle before the machine's agent
   * joins, which wakes the waiter itself).
   */
  wakeOn?: CommandWakeOn;
  /**
   * A sequence on one node: the key of the command this one follows. It stays `pending` and is not dispatched to its
   * agent until that command has `succeeded`; it is `cancelled` (reason `after <key> <state>`) when that command
   * ends any other way. A command that is followed does not queue its wake when it succeeds: the one following it
   * will. Commands of one sequence are enqueued together (one statement) or the earlier first.
   */
  afterKey?: string;
}

/** Which ends of a command queue its `wake`: any (`'settle'`) or only a failure (`'failure'`). */
export type CommandWakeOn = 'settle' | 'failure';

/**
 * The command queue port. `enqueue` is find-before-create by `(nodeId, key)`: a second enqueue with the same key
 * returns the first command unchanged.
 *
 * @example
 * ```ts
 * const command = await ctx.commands.enqueue(tx, { nodeId, kind: 'node.reboot', payload: {}, key: 'wf:…', notAfter });
 * ```
 */
export interface CommandQueue {
  enqueue(tx: SqlExecutor, command: NewCommand): Promise<Command>;
  get(sql: SqlExecutor, id: string): Promise<Command | undefined>;
  findByKey(sql: SqlExecutor, nodeId: string, key: string): Promise<Command | undefined>;
  cancel(tx: SqlExecutor, id: string, reason: string): Promise<Command>;
}

/**
 * What the kernel's command queue adds for core's commit service (not part of the {@link CommandQueue} port):
 * `stage` checks a new command as `enqueue` does (the same errors), without the database, and gives it its id, for
 * `commit` to insert in its own statement. Undefined when a command policy applies to its kind: policies run in the
 * transaction, so such a command goes through `enqueue`. A queue without it (a test double) makes `commit` use `enqueue`.
 *
 * @example
 * ```ts
 * const staged = await queue.stage({ nodeId, kind: 'node.reboot', payload: {}, key: 'wf:…', notAfter });
 * ```
 */
export interface CommandStaging {
  stage(command: NewCommand): Promise<StagedCommand | undefined>;
}

/**
 * A hook every enqueue of a new command passes through (the destructive-batch quorum is one); it throws to refuse.
 * `appliesTo`, when given, names the kinds it looks at: a command of any other kind skips it, and can then be staged
 * ({@link CommandStaging}) rather than enqueued. Without it the policy sees every kind.
 *
 * @example
 * ```ts
 * const refuseWipes: CommandPolicy = Object.assign(
 *   async (_tx: SqlExecutor, command: NewCommand) => {
 *     throw new ComputeError('PERMISSION_DENIED', `${command.kind} needs an operator`);
 *   },
 *   { appliesTo: (kind: CommandKindDefinition) => kind.destructive === true },
 * );
 * ```
 */
export type CommandPolicy = ((
  tx: SqlExecutor,
  command: NewCommand & { tenantId: string },
  kind: CommandKindDefinition,
) => Promise<void>) & {
  readonly appliesTo?: (kind: CommandKindDefinition) => boolean;
};

/** A command kind together with the module that registered it. */
export interface CommandKindEntry {
  readonly moduleId: string;
  readonly definition: CommandKindDefinition;
}

/**
 * Every command kind the installed modules registered, by name.
 *
 * @example
 * ```ts
 * const kinds = createCommandKindRegistry([{ moduleId: 'metal', definition: kexec }]);
 * kinds.get('boot.kexec')?.moduleId; // 'metal'
 * ```
 */
export interface CommandKindRegistry {
  get(name: string): CommandKindEntry | undefined;
  has(name: string): boolean;
  list(): readonly CommandKindEntry[];
}

/** What an agent asks for when it polls: its own node id and how many commands at most (1–100, default 10). */
export interface PollCommandsInput {
  nodeId: string;
  limit?: number;
}

/** An agent acting on one of its own commands. */
export interface AgentCommandRef {
  nodeId: string;
  commandId: string;
}

/** An agent reporting success: the raw result bytes and, when the result decides a transition, a node-signed claim. */
export interface CompleteCommandInput extends AgentCommandRef {
  result?: Uint8Array;
  attested?: Json;
}

/** An agent reporting failure or refusal, with its reason. */
export interface SettleWithReasonInput extends AgentCommandRef {
  reason: string;
}

/**
 * The kernel's command queue: the {@link CommandQueue} port modules see, plus the agent-side functions the agent API
 * calls. Every function that settles a command (succeeded, failed, rejected, expired, cancelled) enqueues the command's
 * `wake` work item in the same transaction.
 *
 * @example
 * ```ts
 * const queue = createCommandQueue({ kinds, clock, work });
 * const [command] = await queue.pollCommands(tx, { nodeId, limit: 10 });
 * await queue.ackCommand(tx, { nodeId, commandId: command.id });
 * ```
 */
export interface KernelCommandQueue extends CommandQueue {
  /** Pending and dispatched commands of the node not past `notAfter`; pending ones become dispatched (at-least-once). */
  pollCommands(tx: SqlExecutor, input: PollCommandsInput): Promise<Command[]>;
  /**
   * Whether `pollCommands` would find anything for the node now (a command to deliver, or an open one past its
   * `notAfter` to expire): one read, no lock, so a long poll's re-check costs a single round trip when there is nothing.
   */
  hasCommandsToPoll(tx: SqlExecutor, input: { nodeId: string }): Promise<boolean>;
  ackCommand(tx: SqlExecutor, input: AgentCommandRef): Promise<Command>;
  startCommand(tx: SqlExecutor, input: AgentCommandRef): Promise<Command>;
  completeCommand(tx: SqlExecutor, input: CompleteCommandInput): Promise<Command>;
  failCommand(tx: SqlExecutor, input: SettleWithReasonInput): Promise<Command>;
  rejectCommand(tx: SqlExecutor, input: SettleWithReasonInput): Promise<Command>;
  /** Expires every open command past its `notAfter` at `now`; returns the ones it expired. */
  expireDueCommands(tx: SqlExecutor, now: Date): Promise<Command[]>;
}
