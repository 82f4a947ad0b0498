import { type StagedCommand, stagedCommandInsertSql, stagedCommandParam } from '../commands/staged-command';
import { COMMANDS_CHANNEL, type CommandQueue, type CommandStaging, type NewCommand } from '../commands/types';
import { ComputeError, isComputeError } from '../errors';
import { stagedEventsInsertSql, stagedEventsParam } from '../events/staged-events';
import type { EventBus, EventStaging, NewEvent, StagedEvent } from '../events/types';
import type { Json } from '../json/types';
import type { Labels } from '../labels';
import { type Bind, bindParams } from '../sql/bind-params';
import type { Notification, SqlExecutor } from '../sql/executor';
import { sendNotifications } from '../sql/notifications';
import { isSqlError } from '../sql/sql-error';
import { fencedError, leaseFenceParams, leaseFenceSql, type ShardLease } from '../work/fenced-executor';
import { requeueItemSql } from '../work/finish';
import type { WorkQueue, WorkRequest } from '../work/types';
import { canWriteWake, workEnqueueSql, workNotifications } from '../work/work-queue';
import { checkChangeName } from './params';

/** What one change's SQL is built with. */
export interface CommitChangeInput {
  /** Adds a parameter and returns its placeholder (`$n`); parameters are numbered in the order they are bound. */
  readonly bind: Bind;
  /**
   * The condition the change must AND into its `WHERE`: for the first change, that the worker still holds its lease
   * (and the command's node exists); for the others, that the first change wrote a row.
   */
  readonly guard: string;
  /** The id of the (first) command this commit sends, if it sends one. */
  readonly commandId: string | undefined;
}

/**
 * A module's own write, one data-modifying CTE of the commit's statement (its name is the CTE's). The first change of
 * a commit is its gate: it must return a row (`RETURNING …`) when it wrote, and the rest of the commit (the other
 * changes, the command, the requeue, the events) is written only then. A change guards itself (a revision, a label
 * check) in its own `WHERE`, and refers to no other change by name: a name two changes share (a staged write carried
 * twice) is numbered for the second (`name_2`).
 *
 * @example
 * ```ts
 * const change: CommitChange = {
 *   name: 'node',
 *   sql: ({ bind, guard }) => `UPDATE plg_acme_nodes SET seen = true WHERE id = ${bind(id)} AND ${guard} RETURNING id`,
 * };
 * ```
 */
export interface CommitChange {
  readonly name: string;
  readonly sql: (input: CommitChangeInput) => string;
  /**
   * What the whole commit needs for this change to be right (a row it reads from, a tenant it names): a condition
   * ANDed into the gate's guard, so that when it fails nothing of the commit is written (`stale`), never the rest
   * without this change.
   */
  readonly requires?: (input: Pick<CommitChangeInput, 'bind'>) => string;
}

/**
 * Writes prepared without the database (ids, hashes and sealed values computed), for the caller to put into a commit
 * of its own: `changes` after its gate, all or nothing with it (their `requires` hold the gate), or `write` in the
 * caller's transaction when the caller cannot take changes (it throws what a failed `requires` means, such as
 * NOT_FOUND). Either way the write happens at most once, with what it goes with.
 *
 * @example
 * ```ts
 * const staged = ctx.pki!.stageJoinTokenSecret!({ tenantId, role: 'node', nodeId, ttlSeconds: 3600, maxUses: 1, secretTenantId });
 * await commit(ctx, { changes: [gate, ...staged.write.changes], command });
 * ```
 */
export interface StagedWrite {
  readonly changes: readonly CommitChange[];
  write(tx: SqlExecutor): Promise<void>;
  /**
   * For a write carried with a step's result (provision's `ctx.writeWithResult`): what the engine may plan the steps
   * after it on before it commits, so that the statement that writes it also starts what follows. Set, the write
   * promises to change nothing the engine reads to start a step (agent sessions, site agents, a driver target's
   * fields, commands), and says the rest: `nodeLabels`, the node's labels once it commits (written whole, and only
   * while the node's row is the version it read: the engine decides the next steps' `when` on them); `runReads`, how
   * it changes what the claim read for a step's run (the modules' preloads): a function that gives those reads as
   * they are once it commits (leaving out what it cannot know), which a run started after it then takes, or
   * `'changed'`: a run started after it gets none of them and reads for itself (its first statement writes what came
   * before it). Unset, the engine plans nothing on it: it writes it first, reading the workflow again before a
   * decision that needs a read or the node's labels, and a step run after it reads for itself.
   */
  readonly leaves?: {
    readonly nodeLabels?: Labels;
    readonly runReads?: 'changed' | ((reads: Readonly<Record<string, Json>>) => Record<string, Json>);
  };
}

/**
 * What a commit writes.
 *
 * @example
 * ```ts
 * const request: CommitRequest = { changes: [change], events: [event], command: input, requeue: until };
 * ```
 */
export interface CommitRequest {
  /** The module's own writes; the first is the gate (see {@link CommitChange}). */
  readonly changes: readonly [CommitChange, ...CommitChange[]];
  /** Events for the outbox, in order, written with the changes. */
  readonly events?: readonly NewEvent[];
  /** A command to send: staged into the statement, or enqueued in the caller's transaction. */
  readonly command?: NewCommand;
  /**
   * More commands to send with it (after `command`, if any), in order: a sequence (`afterKey`) goes out whole or
   * not at all, by the one statement or the caller's transaction.
   */
  readonly commands?: readonly NewCommand[];
  /** Requeue the pass's own work item (`ctx.item`) at this time, in the same statement. */
  readonly requeue?: Date;
  /**
   * The pass is done with its own work item (`ctx.item`, claimed at `seq`): the statement deletes it, only while
   * nothing was enqueued for it since the claim (its `seq` unchanged), and the result says whether it did
   * (`doneWritten`); the reconciler then returns `{ doneWritten: true }`, and otherwise nothing, as usual. Not with
   * `requeue`.
   */
  readonly done?: boolean;
  /**
   * Queue a work item (another reconciler's, such as a workflow's owner) as `ctx.work.enqueue` would, written with the
   * changes: in the statement when the context's work queue is the kernel's, else enqueued in the caller's transaction
   * (without one, the commit is `needs-transaction`, reason `unstaged`).
   */
  readonly wake?: WorkRequest;
}

/** How a commit went. `row` is what the gate returned. */
export type CommitResult<R> =
  | {
      readonly status: 'committed';
      readonly row: R;
      /** The first command sent, and all of them in order. */
      readonly commandId?: string;
      readonly commandIds?: readonly string[];
      readonly requeued: boolean;
      /** Whether the statement deleted the pass's own work item (`done`). */
      readonly doneWritten?: boolean;
    }
  /** The gate wrote nothing (its guard no longer held): nothing was written. */
  | { readonly status: 'stale' }
  /**
   * The commit cannot be written by one statement (a command policy applies to its kind, a command is already under
   * its key, or the context's command queue or event bus cannot stage: `unstaged`): nothing was written; commit again
   * in a transaction.
   */
  | {
      readonly status: 'needs-transaction';
      readonly reason: 'command-policies' | 'command-key-taken' | 'unstaged';
    }
  /** The command queue refused the command (its checks, a policy): nothing of this commit was written. */
  | { readonly status: 'refused'; readonly error: ComputeError };

/**
 * The ports a commit uses: a module context has them all. The kernel's command queue and event bus (the ones a module
 * context carries) can also stage ({@link CommandStaging}, {@link EventStaging}), which is what lets a command and
 * events go into the one statement; without it (a test double) a commit with a command or events needs a transaction,
 * where the command is enqueued and the events published.
 */
export interface CommitContext {
  readonly sql: SqlExecutor;
  readonly clock: { now(): Date };
  readonly commands: CommandQueue & Partial<CommandStaging>;
  readonly events: EventBus & Partial<EventStaging>;
  /** The work queue a commit's `wake` goes to (a module context's `work`). */
  readonly work?: WorkQueue;
  readonly item?: { readonly kind: string; readonly key: string; readonly seq?: number };
  /** The worker's shard lease (a worker's `ctx.lease`): the statement written without `tx` is fenced by it. */
  readonly lease?: ShardLease;
}

interface Built {
  text: string;
  params: unknown[];
  fenced: boolean;
  /** Whether the statement queues the request's `wake` itself. */
  woke: boolean;
  /** The nodes whose agents are notified once the staged commands are committed. */
  commandNodeIds: readonly string[];
}

/** What a commit sends: the ids, the staged commands' parameter (none when enqueued in `tx`), and their nodes. */
interface Sending {
  ids: string[];
  param?: string;
  nodeIds: string[];
}

/**
 * The CTE name of each change: its own, checked, and for a name taken by an earlier change of the commit (a staged
 * write carried twice, as two boot entries' tokens) the name numbered (`join_token_2`), the same for the same commit
 * shape so the statement's text repeats. A change never refers to another by name, only through its guard.
 */
function changeNames(changes: readonly CommitChange[]): string[] {
  const seen = new Map<string, number>();
  const names = changes.map((change) => {
    checkChangeName(change.name);
    const count = (seen.get(change.name) ?? 0) + 1;
    seen.set(change.name, count);
    return count === 1 ? change.name : `${change.name}_${count}`;
  });
  if (new Set(names).size !== names.length) {
    throw new ComputeError('INTERNAL', `a commit's change names collide once numbered: ${names.join(', ')}`);
  }
  return names;
}

function build(
  ctx: CommitContext,
  request: CommitRequest,
  now: Date,
  command: Sending | undefined,
  events: readonly StagedEvent[],
  fenced: boolean,
): Built {
  const { bind, params } = bindParams();
  // Bound when first used: a parameter the statement never reads has no type PGlite can infer.
  let atParam: string | undefined;
  const at = () => {
    atParam ??= `${bind(now)}::timestamptz`;
    return atParam;
  };
  const parts: string[] = [];
  const lease = fenced ? ctx.lease : undefined;
  const gateConditions: string[] = [];
  if (lease) {
    const first = params.length + 1;
    params.push(...leaseFenceParams(lease));
    parts.push(`fence AS (${leaseFenceSql(first)})`);
    gateConditions.push('EXISTS (SELECT 1 FROM fence)');
  }
  // A staged command is inserted only with its node (the insert reads the node's tenant): no node, no commit.
  if (command?.param) {
    for (const nodeId of command.nodeIds)
      gateConditions.push(`EXISTS (SELECT 1 FROM nodes WHERE id = ${bind(nodeId)})`);
  }
  // A change's requirements hold the gate: the commit writes all of its changes or none.
  for (const change of request.changes) if (change.requires) gateConditions.push(`(${change.requires({ bind })})`);
  const names = changeNames(request.changes);
  const written = `EXISTS (SELECT 1 FROM ${names[0]})`;
  for (const [index, change] of request.changes.entries()) {
    const guard = index === 0 ? gateConditions.join(' AND ') || 'TRUE' : written;
    parts.push(`${names[index]} AS (${change.sql({ bind, guard, commandId: command?.ids[0] })})`);
  }
  // Whether the staged command was written: its notification (its node id on COMMANDS_CHANNEL) then wakes its agent's
  // long poll, sent after the commit (see sendNotifications for why not in the statement).
  let notified = '';
  if (command?.param) {
    parts.push(`sent AS (${stagedCommandInsertSql(bind(command.param), at(), written)})`);
    notified = '(SELECT count(*) FROM sent)::int AS commit_sent, ';
  }
  if (request.requeue && ctx.item) {
    const { kind, key } = ctx.item;
    const requeue = requeueItemSql({
      kind: bind(kind),
      key: bind(key),
      at: bind(request.requeue),
      now: at(),
      condition: written,
    });
    parts.push(`requeued AS (${requeue})`);
  }
  let finished = '';
  const seq = ctx.item?.seq;
  if (request.done && !request.requeue && ctx.item && seq !== undefined) {
    parts.push(`finished AS (DELETE FROM work_items WHERE kind = ${bind(ctx.item.kind)} AND key = ${bind(ctx.item.key)}
      AND seq = ${bind(seq)}::int8 AND ${written} RETURNING 1)`);
    finished = '(SELECT count(*) FROM finished)::int AS commit_done, ';
  }
  if (events.length > 0)
    parts.push(`published AS (${stagedEventsInsertSql(bind(stagedEventsParam(events)), written)})`);
  // The wake's notification payloads are selected once from its CTE and sent after commit, as the work queue's own
  // enqueue does.
  let woken = '';
  const wake =
    request.wake && ctx.work && canWriteWake(ctx.work)
      ? workEnqueueSql(ctx.work, request.wake, { bind, now: at(), condition: written, name: 'woken' }, now)
      : undefined;
  if (wake) {
    parts.push(`woken AS (${wake.cte})`);
    woken = `${wake.payloads} AS commit_woken, `;
  }
  const held = lease ? 'EXISTS (SELECT 1 FROM fence)' : 'TRUE';
  const text = `WITH ${parts.join(',\n')}
SELECT (SELECT count(*) FROM ${names[0]})::int AS commit_written, ${held} AS commit_held, ${woken}${notified}${finished}g.*
FROM (SELECT 1) AS commit_one LEFT JOIN LATERAL (SELECT * FROM ${names[0]} LIMIT 1) g ON TRUE`;
  return {
    text,
    params,
    fenced: lease !== undefined,
    woke: wake !== undefined,
    commandNodeIds: command?.param ? command.nodeIds : [],
  };
}

function toSendAny(request: CommitRequest): boolean {
  return request.command !== undefined || (request.commands?.length ?? 0) > 0;
}

async function run<R>(
  sql: SqlExecutor,
  ctx: CommitContext,
  built: Built,
): Promise<{ written: boolean; row: R | undefined; done: boolean }> {
  const { rows } = await sql.query<Record<string, unknown>>(built.text, built.params);
  const { commit_written, commit_held, commit_woken, commit_sent, commit_done, ...row } = rows[0] ?? {};
  const { lease } = ctx;
  if (built.fenced && lease && commit_held !== true) throw fencedError(lease);
  const written = Number(commit_written ?? 0) > 0;
  const notifications: Notification[] = workNotifications(commit_woken);
  if (Number(commit_sent ?? 0) > 0) {
    for (const nodeId of built.commandNodeIds) notifications.push({ channel: COMMANDS_CHANNEL, payload: nodeId });
  }
  await sendNotifications(sql, notifications);
  return { written, row: written ? (row as R) : undefined, done: Number(commit_done ?? 0) > 0 };
}

/**
 * Commits a reconciler's decision: the module's own changes, the events, its commands, the requeue of the
 * pass's work item and the wake of another work item. Without `tx` it is one autocommitted statement, built from the parts with generated parameters:
 * fenced by the worker's shard lease when there is one (`ctx.lease`, which a worker sets; INVALID_STATE `fenced`
 * when it is no longer held), the command and the events staged ({@link CommandStaging}, {@link EventStaging}) and
 * inserted by the same statement, everything gated on the first change. With `tx` (a transaction the caller opened,
 * fenced by the worker's executor already), the command is enqueued there with its policies (`commands.enqueue`,
 * find-before-create), then the statement runs without a fence (events published in `tx` after it when the bus cannot
 * stage). A refused command is reported, never thrown, and nothing of the commit is written. The `wake` is part of the
 * statement whenever the context's work queue is the kernel's, else enqueued in `tx` after it.
 *
 * @example
 * ```ts
 * const result = await commit<{ revision: number }>(ctx, {
 *   changes: [{ name: 'wf', sql: ({ bind, guard }) =>
 *     `UPDATE workflows SET revision = revision + 1 WHERE id = ${bind(id)} AND revision = ${bind(7)} AND ${guard} RETURNING revision` }],
 *   events: [{ tenantId: 'root', subject: `workflow/${id}`, type: 'workflow.started', data: {} }],
 *   requeue: new Date(Date.now() + 60_000),
 * });
 * if (result.status === 'stale') snapshot = await read(ctx.sql, id);
 * ```
 */
export async function commit<R = Record<string, unknown>>(
  ctx: CommitContext,
  request: CommitRequest,
  tx?: SqlExecutor,
): Promise<CommitResult<R>> {
  const { commands, events } = ctx;
  const newEvents = request.events ?? [];
  // Without staging (a test double's queue or bus) only a transaction can write the command and the events.
  // The kernel's work queue builds its upsert into the statement; another (the testkit's) enqueues in a transaction.
  const wakeUnstaged = request.wake !== undefined && (!ctx.work || !canWriteWake(ctx.work));
  if (!tx && ((toSendAny(request) && !commands.stage) || (newEvents.length > 0 && !events.stage) || wakeUnstaged)) {
    return { status: 'needs-transaction', reason: 'unstaged' };
  }
  const toSend = [...(request.command ? [request.command] : []), ...(request.commands ?? [])];
  let command: Sending | undefined;
  if (toSend.length > 0 && tx) {
    let ids: string[];
    try {
      // Several in a savepoint: one refused takes back those enqueued before it, so a sequence is whole or absent.
      ids =
        toSend.length === 1
          ? [(await commands.enqueue(tx, toSend[0] as NewCommand)).id]
          : await tx.transaction(async (inner) => {
              const enqueued: string[] = [];
              for (const input of toSend) enqueued.push((await commands.enqueue(inner, input)).id);
              return enqueued;
            });
    } catch (error) {
      if (isComputeError(error)) return { status: 'refused', error };
      throw error;
    }
    command = { ids, nodeIds: [] };
  } else if (toSend.length > 0 && commands.stage) {
    const staged: StagedCommand[] = [];
    try {
      for (const input of toSend) {
        const one = await commands.stage(input);
        if (!one) return { status: 'needs-transaction', reason: 'command-policies' };
        staged.push(one);
      }
    } catch (error) {
      if (isComputeError(error)) return { status: 'refused', error };
      throw error;
    }
    const nodeIds = [...new Set(staged.map((one) => one.nodeId))];
    command = { ids: staged.map((one) => one.id), param: stagedCommandParam(staged), nodeIds };
  }
  const stagedEvents: StagedEvent[] = [];
  if (events.stage) for (const event of newEvents) stagedEvents.push(events.stage(event));
  const built = build(ctx, request, ctx.clock.now(), command, stagedEvents, tx === undefined);
  let outcome: { written: boolean; row: R | undefined; done: boolean };
  try {
    outcome = await run<R>(tx ?? ctx.sql, ctx, built);
  } catch (error) {
    // A command already under the key fails the insert: nothing was written; enqueue finds that one.
    if (command?.param && isSqlError(error, 'unique-violation')) {
      return { status: 'needs-transaction', reason: 'command-key-taken' };
    }
    throw error;
  }
  if (!outcome.written) return { status: 'stale' };
  // Not staged: published in the caller's transaction, after the change they describe (only with `tx`, see above).
  if (tx && stagedEvents.length < newEvents.length) for (const event of newEvents) await events.publish(tx, event);
  if (tx && request.wake && !built.woke) await ctx.work?.enqueue(tx, request.wake);
  return {
    status: 'committed',
    row: outcome.row as R,
    ...(command ? { commandId: command.ids[0], commandIds: command.ids } : {}),
    requeued: request.requeue !== undefined && ctx.item !== undefined,
    ...(outcome.done ? { doneWritten: true } : {}),
  };
}
