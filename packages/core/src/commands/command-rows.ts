import type { Json } from '../json/types';
import type { SqlExecutor } from '../sql/executor';
import type { Command, CommandState } from './types';

/**
 * A `commands` row as the database returns it (`SELECT c.* FROM commands c …`).
 *
 * @example
 * ```ts
 * const { rows } = await sql.query<CommandRow>('SELECT * FROM commands WHERE node_id = $1', [nodeId]);
 * ```
 */
export interface CommandRow {
  id: string;
  tenant_id: string;
  node_id: string;
  kind: string;
  payload: Json;
  key: string;
  state: CommandState;
  not_after: Date;
  batch_id: string | null;
  workflow_id: string | null;
  step_id: string | null;
  target_node_id: string | null;
  wake_kind: string | null;
  wake_key: string | null;
  wake_on: string | null;
  after_key: string | null;
  result: Uint8Array | null;
  attested: Json | null;
  reason: string | null;
  created_at: Date;
  updated_at: Date;
  dispatched_at: Date | null;
  finished_at: Date | null;
}

/** Bytes as a plain Uint8Array: postgres.js hands back Buffers, PGlite Uint8Arrays. */
export function toPlainBytes(bytes: Uint8Array): Uint8Array {
  return Uint8Array.from(bytes);
}

/** Bytes as a query parameter both backends send as bytea. */
export function bytesParam(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * A stored row as a {@link Command}, leaving absent optional fields out: for a module that reads commands in a
 * statement of its own (with the rows it needs besides them) rather than through the queue.
 *
 * @example
 * ```ts
 * const commands = rows.map(toCommand); // rows of `SELECT c.* FROM commands c …`
 * ```
 */
export function toCommand(row: CommandRow): Command {
  const command: Command = {
    id: row.id,
    tenantId: row.tenant_id,
    nodeId: row.node_id,
    kind: row.kind,
    payload: row.payload,
    key: row.key,
    state: row.state,
    notAfter: row.not_after,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
  if (row.batch_id !== null) command.batchId = row.batch_id;
  if (row.workflow_id !== null) command.workflowId = row.workflow_id;
  if (row.step_id !== null) command.stepId = row.step_id;
  if (row.target_node_id !== null) command.targetNodeId = row.target_node_id;
  if (row.wake_kind !== null && row.wake_key !== null) command.wake = { kind: row.wake_kind, key: row.wake_key };
  if (row.wake_on === 'failure') command.wakeOn = 'failure';
  if (row.after_key !== null) command.afterKey = row.after_key;
  if (row.result !== null) command.result = toPlainBytes(row.result);
  if (row.attested !== null) command.attested = row.attested;
  if (row.reason !== null) command.reason = row.reason;
  if (row.dispatched_at !== null) command.dispatchedAt = row.dispatched_at;
  if (row.finished_at !== null) command.finishedAt = row.finished_at;
  return command;
}

/** Reads one command by id, optionally locking its row for the rest of the transaction. */
export async function selectCommand(sql: SqlExecutor, id: string, lock = false): Promise<Command | undefined> {
  const { rows } = await sql.query<CommandRow>(`SELECT * FROM commands WHERE id = $1${lock ? ' FOR UPDATE' : ''}`, [
    id,
  ]);
  return rows[0] ? toCommand(rows[0]) : undefined;
}

/**
 * A `commands` row as one JSON value, for a statement that reads commands inside a larger JSON value (a claim's
 * preload): the row's columns by name, the result bytes as base64. {@link commandFromJson} turns it back.
 *
 * @example
 * ```ts
 * const sql = `SELECT json_agg(${commandJsonSql('c')}) FROM commands c WHERE c.workflow_id = $1`;
 * ```
 */
export function commandJsonSql(alias: string): string {
  return `((to_jsonb(${alias}) - 'result') || jsonb_build_object('result', encode(${alias}.result, 'base64')))`;
}

const COMMAND_DATE_COLUMNS = ['not_after', 'created_at', 'updated_at', 'dispatched_at', 'finished_at'] as const;

/**
 * A command read as {@link commandJsonSql} wrote it, as a {@link Command}; undefined when the value is not one.
 *
 * @example
 * ```ts
 * const commands = (preloaded.commands as unknown[]).map(commandFromJson).filter((c) => c !== undefined);
 * ```
 */
export function commandFromJson(value: unknown): Command | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const raw = value as Record<string, unknown>;
  if (typeof raw.id !== 'string' || typeof raw.key !== 'string' || typeof raw.node_id !== 'string') return undefined;
  const row: Record<string, unknown> = { ...raw };
  for (const column of COMMAND_DATE_COLUMNS) {
    const at = raw[column];
    row[column] = typeof at === 'string' ? new Date(at) : null;
  }
  row.result = typeof raw.result === 'string' ? Uint8Array.from(Buffer.from(raw.result, 'base64')) : null;
  // to_jsonb writes every column, NULLs as null: the rest is the row as the driver returns it.
  return toCommand(row as unknown as CommandRow);
}
