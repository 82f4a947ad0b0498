import type { Clock } from '../clock';
import { ComputeError } from '../errors';
import { newId } from '../ids';
import { assertJson } from '../json';
import type { Json } from '../json/types';
import { validateInput } from '../manifest';
import type { SqlExecutor } from '../sql/executor';
import { sendNotifications } from '../sql/notifications';
import type { WorkQueue } from '../work/types';
import { notifyInStatementSql, urgentWakeSql } from '../work/work-queue';
import { checkNewCommand, MAX_COMMAND_REASON_LENGTH, requireText } from './command-input';
import { bytesParam, type CommandRow, selectCommand, toCommand } from './command-rows';
import type { StagedCommand } from './staged-command';
import {
  assertCommandTransition,
  canTransitionCommand,
  isTerminalCommandState,
  OPEN_COMMAND_STATES,
  TERMINAL_COMMAND_STATES,
} from './state-machine';
import {
  type AgentCommandRef,
  COMMANDS_CHANNEL,
  type Command,
  type CommandKindDefinition,
  type CommandKindEntry,
  type CommandKindRegistry,
  type CommandPolicy,
  type CommandStaging,
  type CommandState,
  type KernelCommandQueue,
  type NewCommand,
} from './types';

/** What {@link createCommandQueue} takes. */
export interface CommandQueueOptions {
  kinds: CommandKindRegistry;
  clock: Clock;
  /** Where settling a command queues its `wake` work item, in the same transaction. */
  work: WorkQueue;
  /** Hooks every new command passes through before it is stored (the destructive-batch quorum is one). */
  policies?: readonly CommandPolicy[];
}

/** The default and the largest number of commands one poll returns. */
export const DEFAULT_POLL_LIMIT = 10;
export const MAX_POLL_LIMIT = 100;

const OPEN_SQL = `(${OPEN_COMMAND_STATES.map((s) => `'${s}'`).join(', ')})`;

interface Change {
  reason?: string;
  result?: Uint8Array;
  attested?: Json;
}

function notFound(commandId: string): ComputeError {
  return new ComputeError('NOT_FOUND', `command ${commandId} not found`, { details: { path: ['commandId'] } });
}

const EXPIRED_REASON = 'notAfter passed';

/**
 * Whether the command row `c` may go to its agent: it follows no command, or the one it follows (same node, its
 * `after_key`) has succeeded. Judged when polled, not when that one succeeds, so a command enqueued after its
 * predecessor's success is never held back. For an agent front that picks commands up with SQL of its own.
 *
 * @example
 * ```ts
 * const sql = `SELECT * FROM commands c WHERE c.node_id = $1 AND c.state = 'pending' AND ${DISPATCHABLE_SQL}`;
 * ```
 */
// The predecessor is read by its node and key alone (the unique key), and its state compared after: with the state in
// the lookup, the planner may take the index on (node, state) and walk every succeeded command of the node (a site
// agent's whole history) for each follower.
export const DISPATCHABLE_SQL = `(c.after_key IS NULL OR (SELECT p.state FROM commands p
  WHERE p.node_id = c.node_id AND p.key = c.after_key) = 'succeeded')`;

/** Whether a command is still open but past its deadline at `now` (the deadline itself still counts as live). */
export function isCommandDue(command: Pick<Command, 'state' | 'notAfter'>, now: Date): boolean {
  return OPEN_COMMAND_STATES.includes(command.state) && command.notAfter.getTime() < now.getTime();
}

/** Only for the one-statement move: the command must be in one of `from`, the owner's, and not past `notAfter`. */
interface MoveGuard {
  from: readonly CommandState[];
  owner: string | undefined;
}

async function applyMove(
  tx: SqlExecutor,
  work: WorkQueue,
  commandId: string,
  to: CommandState,
  now: Date,
  change: Change,
  guard?: MoveGuard,
): Promise<Command | undefined> {
  const terminal = isTerminalCommandState(to);
  const params: unknown[] = [
    commandId,
    to,
    now,
    terminal,
    change.reason ?? null,
    change.result ? bytesParam(change.result) : null,
    change.attested === undefined ? null : JSON.stringify(change.attested),
  ];
  let where = 'id = $1';
  if (guard) {
    params.push([...guard.from], guard.owner ?? null);
    where += ' AND state = ANY($8::text[]) AND not_after >= $3 AND ($9::text IS NULL OR node_id = $9)';
  }
  const update = `UPDATE commands SET state = $2, updated_at = $3,
       dispatched_at = CASE WHEN $2 = 'dispatched' THEN $3 ELSE dispatched_at END,
       finished_at = CASE WHEN $4::boolean THEN $3 ELSE finished_at END,
       reason = COALESCE($5, reason), result = COALESCE($6::bytea, result), attested = COALESCE($7::jsonb, attested)
     WHERE ${where} RETURNING *`;
  if (!terminal) {
    const { rows } = await tx.query<CommandRow>(update, params);
    if (!rows[0] && !guard) throw notFound(commandId);
    return rows[0] ? toCommand(rows[0]) : undefined;
  }
  // A settle queues its wake in the same statement, so an agent's result is one round trip and needs no transaction
  // to be atomic; with a work queue that is not the kernel's (the testkit's), through enqueue. Its notification is
  // sent by the statement too: the waiting workflow's next command follows this result, and a wake sent after the
  // commit would first wait for the agent API's process to run again. The same statement ends the command's sequence:
  // see SEQUENCE_SQL.
  const wake = urgentWakeSql(work, 'woken', WAKES_SQL, '$3', params);
  const { rows } = await tx.query<CommandRow & { woken?: unknown; followers: number; wakes?: unknown }>(
    `WITH moved AS (${update}), ${SEQUENCE_SQL} ${wake?.cte ?? ''}
     SELECT moved.*, (SELECT count(*) FROM followers)::int AS followers,
       ${
         wake
           ? `${notifyInStatementSql(wake.payloads)} AS woken`
           : `(SELECT json_agg(json_build_array(wake_kind, wake_key)) FROM (${WAKES_SQL}) w) AS wakes`
       }
     FROM moved`,
    params,
  );
  const row = rows[0];
  if (!row) {
    if (guard) return undefined;
    throw notFound(commandId);
  }
  const { woken: _woken, followers, wakes, ...settled } = row;
  const moved = toCommand(settled as CommandRow);
  if (!wake) {
    for (const [kind, key] of (wakes as [string | null, string | null][] | null) ?? []) {
      if (kind && key) await work.enqueue(tx, { kind, key, urgent: true });
    }
  }
  // A command that succeeded with commands following it: its agent's long poll can now take the next one.
  if (moved.state === 'succeeded' && followers > 0) {
    await sendNotifications(tx, [{ channel: COMMANDS_CHANNEL, payload: moved.nodeId }]);
  }
  return moved;
}

// The end of a command's sequence, as CTEs after `moved` (a command just settled): `followers`, the pending commands
// that follow it (`after_key`); `dropped`, every pending command after it, however far down the sequence, cancelled
// when it ended any way but `succeeded`, with its reason when it was cancelled (an abort's), else `after <key>
// <state>`. A success changes no follower: pollCommands looks at a command's predecessor. Cancelling here keeps a
// failed sequence from waiting out its commands' `notAfter`.
const SEQUENCE_SQL = `followers AS (
    SELECT d.id FROM commands d JOIN moved m ON d.node_id = m.node_id AND d.after_key = m.key WHERE d.state = 'pending'),
  dropped AS (
    UPDATE commands SET state = 'cancelled', updated_at = $3, finished_at = $3,
      reason = (SELECT CASE WHEN m.state = 'cancelled' THEN m.reason ELSE 'after ' || m.key || ' ' || m.state END
        FROM moved m)
    WHERE state = 'pending' AND id IN (
      WITH RECURSIVE chain (id, node_id, key) AS (
        SELECT d.id, d.node_id, d.key FROM commands d JOIN moved m ON d.node_id = m.node_id AND d.after_key = m.key
        WHERE m.state <> 'succeeded'
        UNION
        SELECT d.id, d.node_id, d.key FROM commands d JOIN chain c ON d.node_id = c.node_id AND d.after_key = c.key)
      SELECT id FROM chain)
    RETURNING wake_kind, wake_key)`;

// The wakes a settle queues: the command's own, unless it succeeded and either wakes only on failure or has a command
// following it (whose own end will wake the waiter), and those of the commands it cancelled down its sequence.
const WAKES_SQL = `SELECT wake_kind, wake_key FROM moved
    WHERE moved.state <> 'succeeded' OR (moved.wake_on IS NULL AND NOT EXISTS (SELECT 1 FROM followers))
  UNION SELECT wake_kind, wake_key FROM dropped`;

const ALL_STATES: readonly CommandState[] = [...OPEN_COMMAND_STATES, ...TERMINAL_COMMAND_STATES];
// The states each move may start from, for the one-statement path.
const MOVABLE_FROM = new Map(
  ALL_STATES.map((to) => [to, ALL_STATES.filter((from) => canTransitionCommand(from, to))] as const),
);

/**
 * Moves one command to `to` under a row lock and queues its wake when it settles. An `owner` other than the command's
 * node is NOT_FOUND. A command found open past its `notAfter` is expired first; that expiry is kept (its savepoint is
 * released) even when the requested move is then refused as INVALID_STATE, unless the caller rolls back its own
 * transaction.
 */
async function move(
  tx: SqlExecutor,
  work: WorkQueue,
  commandId: string,
  to: CommandState,
  now: Date,
  change: Change = {},
  owner?: string,
): Promise<Command> {
  requireText(commandId, ['commandId']);
  // The common case (an agent moving its own live command along) is one statement; anything else (not found, past
  // notAfter, a repeat, a refusal) takes the locked read below, in a savepoint, which sorts it out.
  if (to !== 'expired') {
    const guard = { from: MOVABLE_FROM.get(to) ?? [], owner };
    const moved = await applyMove(tx, work, commandId, to, now, change, guard);
    if (moved) return moved;
  }
  const outcome = await tx.transaction(async (inner): Promise<{ command: Command; refused: boolean }> => {
    let current = await selectCommand(inner, commandId, true);
    if (!current || (owner !== undefined && current.nodeId !== owner)) throw notFound(commandId);
    if (to !== 'expired' && isCommandDue(current, now)) {
      current = (await applyMove(inner, work, commandId, 'expired', now, { reason: EXPIRED_REASON })) as Command;
    }
    if (current.state === to && isTerminalCommandState(to)) return { command: current, refused: false };
    if (!canTransitionCommand(current.state, to)) return { command: current, refused: true };
    return { command: (await applyMove(inner, work, commandId, to, now, change)) as Command, refused: false };
  });
  if (outcome.refused) assertCommandTransition(outcome.command.state, to, commandId);
  return outcome.command;
}

/** Lazy expiry: a command read open past its `notAfter` is expired (and its wake queued) before it is returned. */
async function expireIfDue(sql: SqlExecutor, work: WorkQueue, command: Command, now: Date): Promise<Command> {
  if (!isCommandDue(command, now)) return command;
  return sql.transaction(async (inner) => {
    const locked = await selectCommand(inner, command.id, true);
    if (!locked || !isCommandDue(locked, now)) return locked ?? command;
    return (await applyMove(inner, work, command.id, 'expired', now, { reason: EXPIRED_REASON })) as Command;
  });
}

async function expireAll(tx: SqlExecutor, work: WorkQueue, rows: CommandRow[], now: Date): Promise<Command[]> {
  const expired: Command[] = [];
  for (const row of rows) expired.push(await move(tx, work, row.id, 'expired', now, { reason: EXPIRED_REASON }));
  return expired;
}

/**
 * Expires every open command (of any node) past its `notAfter` at `now`, at most 1,000 per call, skipping rows another
 * transaction holds, and queues each one's wake through `work`. The kernel's sweep runs it; returns what it expired.
 *
 * @example
 * ```ts
 * await db.transaction((tx) => expireDueCommands(tx, clock.now(), ctx.work));
 * ```
 */
export async function expireDueCommands(tx: SqlExecutor, now: Date, work: WorkQueue): Promise<Command[]> {
  if (!(now instanceof Date) || Number.isNaN(now.getTime())) {
    throw new ComputeError('INVALID_INPUT', 'now must be a valid Date', { details: { path: ['now'] } });
  }
  return tx.transaction(async (inner) => {
    const due = await inner.query<CommandRow>(
      `SELECT * FROM commands WHERE state IN ${OPEN_SQL} AND not_after < $1 ORDER BY not_after, id LIMIT 1000
       FOR UPDATE SKIP LOCKED`,
      [now],
    );
    return expireAll(inner, work, due.rows, now);
  });
}

/**
 * The kernel's command queue over the `commands` table: find-before-create enqueue, the state machine, the agent-side
 * functions, and the `wake` work item queued with every settle; with {@link CommandStaging} for core's commit service.
 *
 * @example
 * ```ts
 * const commands = createCommandQueue({ kinds, clock: systemClock, work });
 * await db.transaction((tx) => commands.enqueue(tx, { nodeId, kind: 'node.reboot', payload: {}, key: 'wf:1:reboot', notAfter }));
 * ```
 */
export function createCommandQueue(options: CommandQueueOptions): KernelCommandQueue & CommandStaging {
  const { kinds, clock, work } = options;
  const policies = [...(options.policies ?? [])];
  const policiesFor = (kind: CommandKindDefinition) =>
    policies.filter((policy) => policy.appliesTo === undefined || policy.appliesTo(kind));

  async function findByKey(sql: SqlExecutor, nodeId: string, key: string): Promise<Command | undefined> {
    requireText(nodeId, ['nodeId']);
    requireText(key, ['key']);
    const { rows } = await sql.query<CommandRow>('SELECT * FROM commands WHERE node_id = $1 AND key = $2', [
      nodeId,
      key,
    ]);
    return rows[0] ? expireIfDue(sql, work, toCommand(rows[0]), clock.now()) : undefined;
  }

  async function get(sql: SqlExecutor, id: string): Promise<Command | undefined> {
    requireText(id, ['id']);
    const command = await selectCommand(sql, id);
    return command ? expireIfDue(sql, work, command, clock.now()) : undefined;
  }

  // The checks enqueue and stage share: the command's shape, a registered kind, the payload against its manifest.
  async function checked(input: NewCommand): Promise<{ kind: CommandKindEntry; payload: Json }> {
    checkNewCommand(input, clock);
    const kind = kinds.get(input.kind);
    if (!kind) {
      throw new ComputeError('INVALID_CONFIG', `unknown command kind ${input.kind}`, {
        details: { path: ['kind'], kind: input.kind },
      });
    }
    const payload = await validateInput(kind.definition.payload, input.payload, ['payload']);
    assertJson(payload, ['payload'], 'INVALID_INPUT');
    return { kind, payload: payload as Json };
  }

  async function stage(input: NewCommand): Promise<StagedCommand | undefined> {
    const { kind, payload } = await checked(input);
    if (policiesFor(kind.definition).length > 0) return undefined;
    return { ...input, id: newId('cmd'), payload };
  }

  async function enqueue(tx: SqlExecutor, input: NewCommand): Promise<Command> {
    const { kind, payload } = await checked(input);
    // One read finds the node's tenant and a command already under this key (find-before-create).
    const { rows: found } = await tx.query<CommandRow & { node_tenant_id: string }>(
      `SELECT n.tenant_id AS node_tenant_id, c.* FROM nodes n
       LEFT JOIN commands c ON c.node_id = n.id AND c.key = $2 WHERE n.id = $1`,
      [input.nodeId, input.key],
    );
    const row = found[0];
    if (!row) throw new ComputeError('NOT_FOUND', `node ${input.nodeId} not found`, { details: { path: ['nodeId'] } });
    if (row.id !== null) return expireIfDue(tx, work, toCommand(row), clock.now());
    const tenantId = row.node_tenant_id;
    const applicable = policiesFor(kind.definition);
    const create = async (sql: SqlExecutor): Promise<Command> => {
      const command: NewCommand & { tenantId: string } = { ...input, payload, tenantId };
      for (const policy of applicable) await policy(sql, command, kind.definition);
      const now = clock.now();
      const { rows } = await sql.query<CommandRow>(
        `INSERT INTO commands (id, tenant_id, node_id, kind, payload, key, state, not_after, batch_id,
           workflow_id, step_id, target_node_id, wake_kind, wake_key, wake_on, after_key, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5::jsonb, $6, 'pending', $7, $8, $9, $10, $11, $12, $13, $15, $16, $14, $14)
         ON CONFLICT (node_id, key) DO NOTHING RETURNING *`,
        [
          newId('cmd'),
          tenantId,
          input.nodeId,
          input.kind,
          JSON.stringify(payload),
          input.key,
          input.notAfter,
          input.batchId ?? null,
          input.workflowId ?? null,
          input.stepId ?? null,
          input.targetNodeId ?? null,
          input.wake?.kind ?? null,
          input.wake?.key ?? null,
          now,
          input.wakeOn === 'failure' ? 'failure' : null,
          input.afterKey ?? null,
        ],
      );
      if (rows[0]) {
        // The node's agent's long poll is woken once the command is committed.
        await sendNotifications(sql, [{ channel: COMMANDS_CHANNEL, payload: input.nodeId }]);
        return toCommand(rows[0]);
      }
      // Another transaction created it between our lookup and our insert.
      const raced = await findByKey(sql, input.nodeId, input.key);
      if (!raced) throw new ComputeError('INTERNAL', 'command vanished while enqueueing');
      return raced;
    };
    // A policy may run statements of its own: in a savepoint, so one that fails leaves the caller's transaction usable.
    return applicable.length > 0 ? tx.transaction(create) : create(tx);
  }

  function agentMove(tx: SqlExecutor, ref: AgentCommandRef, to: CommandState, change: Change = {}) {
    const nodeId = requireText(ref?.nodeId, ['nodeId']);
    return move(tx, work, ref.commandId, to, clock.now(), change, nodeId);
  }

  function reasonOf(reason: unknown): string {
    return requireText(reason, ['reason'], MAX_COMMAND_REASON_LENGTH);
  }

  return {
    enqueue,
    stage,
    findByKey,
    get,
    cancel: (tx, id, reason) => move(tx, work, id, 'cancelled', clock.now(), { reason: reasonOf(reason) }),

    async pollCommands(tx, input) {
      const nodeId = requireText(input?.nodeId, ['nodeId']);
      const limit = input.limit ?? DEFAULT_POLL_LIMIT;
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_POLL_LIMIT) {
        throw new ComputeError('INVALID_INPUT', `limit must be an integer from 1 to ${MAX_POLL_LIMIT}`, {
          details: { path: ['limit'] },
        });
      }
      const now = clock.now();
      return tx.transaction(async (inner) => {
        const due = await inner.query<CommandRow>(
          `SELECT * FROM commands WHERE node_id = $1 AND state IN ${OPEN_SQL} AND not_after < $2 ORDER BY id FOR UPDATE`,
          [nodeId, now],
        );
        await expireAll(inner, work, due.rows, now);
        const live = await inner.query<CommandRow>(
          `SELECT * FROM commands c WHERE node_id = $1 AND state IN ('pending', 'dispatched') AND not_after >= $2
             AND ${DISPATCHABLE_SQL} ORDER BY created_at, id LIMIT $3 FOR UPDATE`,
          [nodeId, now, limit],
        );
        const polled: Command[] = [];
        for (const row of live.rows) {
          polled.push(
            row.state === 'pending' ? await move(inner, work, row.id, 'dispatched', now, {}, nodeId) : toCommand(row),
          );
        }
        return polled;
      });
    },

    async hasCommandsToPoll(tx, input) {
      const nodeId = requireText(input?.nodeId, ['nodeId']);
      const { rows } = await tx.query<{ found: boolean }>(
        `SELECT EXISTS (SELECT 1 FROM commands c WHERE node_id = $1 AND state IN ${OPEN_SQL}
           AND ((state IN ('pending', 'dispatched') AND ${DISPATCHABLE_SQL}) OR not_after < $2)) AS found`,
        [nodeId, clock.now()],
      );
      return rows[0]?.found === true;
    },

    ackCommand: (tx, input) => agentMove(tx, input, 'acked'),
    startCommand: (tx, input) => agentMove(tx, input, 'running'),
    completeCommand(tx, input) {
      if (input?.result !== undefined && !(input.result instanceof Uint8Array)) {
        throw new ComputeError('INVALID_INPUT', 'result must be bytes', { details: { path: ['result'] } });
      }
      if (input?.attested !== undefined) assertJson(input.attested, ['attested'], 'INVALID_INPUT');
      return agentMove(tx, input, 'succeeded', { result: input.result, attested: input.attested });
    },
    failCommand: (tx, input) => agentMove(tx, input, 'failed', { reason: reasonOf(input?.reason) }),
    rejectCommand: (tx, input) => agentMove(tx, input, 'rejected', { reason: reasonOf(input?.reason) }),
    expireDueCommands: (tx, now) => expireDueCommands(tx, now, work),
  };
}
