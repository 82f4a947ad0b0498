import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { Json } from '../json/types';
import type { SqlExecutor } from '../sql/executor';

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
  createdAt: Date;
  updatedAt: Date;
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
}

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

/** A hook every enqueue passes through (the destructive-batch quorum is one); it throws to refuse. */
export type CommandPolicy = (
  tx: SqlExecutor,
  command: NewCommand & { tenantId: string },
  kind: CommandKindDefinition,
) => Promise<void>;
