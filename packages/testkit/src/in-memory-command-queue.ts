import {
  type Clock,
  type Command,
  type CommandKindRegistry,
  type CommandQueue,
  type CommandState,
  ComputeError,
  type ErrorPath,
  type Json,
  newId,
  type SqlExecutor,
  validateInput,
  type WorkQueue,
} from '@better-compute/core';
import { assertJson } from '@better-compute/core/checks';
import { checkNewCommand, requireCommandText as requireText } from '@better-compute/core/conformance';
import {
  assertCommandTransition,
  isCommandDue,
  isTerminalCommandState,
  MAX_COMMAND_REASON_LENGTH,
} from '@better-compute/core/kernel';
import { encodeResult } from './result-bytes';

/**
 * What {@link createInMemoryCommandQueue} takes.
 *
 * @example
 * ```ts
 * const work = createInMemoryWorkQueue(clock);
 * const options: InMemoryCommandQueueOptions = { clock, work, kinds: ctx.commandKinds };
 * ```
 */
export interface InMemoryCommandQueueOptions {
  /** Stamps every change and decides expiry (`now > notAfter`). */
  clock: Clock;
  /** Where a settle queues the command's `wake` (an in-memory work queue, typically). Without it, wakes are dropped. */
  work?: WorkQueue;
  /**
   * When given, an unknown kind is INVALID_CONFIG at `['kind']` and the payload is validated (and defaulted) by the
   * kind's schema, as the kernel does. Without it every kind is accepted and the payload only has to be JSON.
   */
  kinds?: CommandKindRegistry;
  /**
   * The `tenantId` commands get (the kernel takes it from the node row; an in-memory queue has no nodes). Default
   * `root`.
   */
  tenantId?: string;
}

/**
 * What {@link InMemoryCommandQueue.succeed} takes: the result (bytes, or JSON stored as its UTF-8 text) and the claim.
 *
 * @example
 * ```ts
 * await commands.succeed(id, { result: { disks: 2 }, attested: { signature } } satisfies SucceedCommandInput);
 * ```
 */
export interface SucceedCommandInput {
  result?: Uint8Array | Json;
  attested?: Json;
}

/**
 * A {@link CommandQueue} kept in memory, plus the test-side moves an agent would make.
 *
 * @example
 * ```ts
 * const commands: InMemoryCommandQueue = createInMemoryCommandQueue({ clock, work });
 * const step = await runStep({ ...ctx, commands });
 * const [command] = commands.list();
 * await commands.succeed(command.id, { result: { ok: true } });
 * ```
 */
export interface InMemoryCommandQueue extends CommandQueue {
  /** Every command as stored, oldest first (copies). No lazy expiry: a command past `notAfter` still shows open. */
  list(): Command[];
  /**
   * Settles the command as `succeeded`, walking it along the agent's path first (pending → dispatched → acked →
   * running). A terminal command is refused (INVALID_STATE), except one already succeeded, returned unchanged.
   */
  succeed(id: string, input?: SucceedCommandInput): Promise<Command>;
  /** Settles the command as `failed`, walking it to `running` first; refusals as for {@link succeed}. */
  fail(id: string, reason: string): Promise<Command>;
  /** Settles the command as `rejected` from pending (via dispatched), dispatched or acked; running is refused. */
  reject(id: string, reason: string): Promise<Command>;
  /** The kernel's sweep: expires every open command past `notAfter` at `now` (default the clock's), with wakes. */
  expireDue(now?: Date): Promise<Command[]>;
}

const EXPIRED_REASON = 'notAfter passed';

function invalid(path: ErrorPath, message: string): ComputeError {
  return new ComputeError('INVALID_INPUT', message, { details: { path } });
}

// Test-side moves have no transaction; a WorkQueue that uses the one it is given cannot take their wakes.
const NO_TRANSACTION: SqlExecutor = {
  query: () => Promise.reject(noTransaction()),
  transaction: () => Promise.reject(noTransaction()),
};

function noTransaction(): ComputeError {
  return new ComputeError(
    'INVALID_STATE',
    'the in-memory command queue settled a command outside any transaction: give it a work queue that ignores the ' +
      'transaction (createInMemoryWorkQueue)',
  );
}

function notFound(id: string): ComputeError {
  return new ComputeError('NOT_FOUND', `command ${id} not found`, { details: { path: ['commandId'] } });
}

interface Change {
  reason?: string;
  result?: Uint8Array;
  attested?: Json;
}

/**
 * Makes an {@link InMemoryCommandQueue} that follows the kernel's rules without a database: `enqueue` checks the
 * command's shape (INVALID_INPUT at the field), its kind and payload when `kinds` is given, and is find-before-create
 * by `(nodeId, key)` (the first command comes back unchanged, whatever the second asks); `get` and `findByKey` expire
 * a command past `notAfter` before returning it (lazy expiry, queueing its wake once); every move follows the state
 * machine (`canTransitionCommand`), refusing others with INVALID_STATE; every settle (succeeded, failed, rejected,
 * expired, cancelled) queues the command's `wake` into `work` (a sequence's `afterKey` and `wakeOn` as the kernel keeps them; a command
 * still waiting for the one it follows cannot be driven). Ids are `cmd_…`. It does not check that the node
 * exists and runs no command policies. Its checks are the kernel's own (`checkNewCommand` of
 * `@better-compute/core/conformance`), and it passes the kernel's command queue behaviour suite
 * (`defineCommandQueueBehaviour`).
 *
 * It ignores the transaction it is given: a change is kept at once and nothing rolls it back when that transaction
 * does (wakes go to `work` with that transaction, which an in-memory work queue ignores too). Use it for unit tests of
 * one step or reconciler; use `compute.commands` wherever a rollback must take the command with it.
 *
 * @example
 * ```ts
 * const work = createInMemoryWorkQueue(clock);
 * const commands = createInMemoryCommandQueue({ clock, work, kinds: compute.context.commandKinds });
 * const command = await commands.enqueue(tx, {
 *   nodeId, kind: 'node.reboot', payload: {}, key: 'wf:1:reboot', notAfter: addMs(clock.now(), 60_000),
 *   wake: { kind: 'workflow', key: nodeId },
 * });
 * await commands.succeed(command.id);
 * work.takeDue(); // [{ kind: 'workflow', key: nodeId, … }]
 * ```
 */
export function createInMemoryCommandQueue(options: InMemoryCommandQueueOptions): InMemoryCommandQueue {
  const { clock, work, kinds } = options;
  const tenantId = requireText(options.tenantId ?? 'root', ['tenantId']);
  const byId = new Map<string, Command>();
  const byKey = new Map<string, string>();
  const keyOf = (nodeId: string, key: string) => JSON.stringify([nodeId, key]);
  const copy = (command: Command): Command => structuredClone(command);

  async function apply(tx: SqlExecutor, current: Command, to: CommandState, now: Date, change: Change) {
    const terminal = isTerminalCommandState(to);
    const next: Command = { ...current, state: to, updatedAt: now };
    if (to === 'dispatched') next.dispatchedAt = now;
    if (terminal) next.finishedAt = now;
    if (change.reason !== undefined) next.reason = change.reason;
    if (change.result !== undefined) next.result = Uint8Array.from(change.result);
    if (change.attested !== undefined) next.attested = structuredClone(change.attested);
    const followers = terminal ? followersOf(current) : [];
    // As the kernel's: a success with commands following it, or of a command that wakes only on failure, wakes no one.
    const wakes: { kind: string; key: string }[] = [];
    if (terminal && next.wake && (to !== 'succeeded' || (next.wakeOn !== 'failure' && followers.length === 0))) {
      wakes.push(next.wake);
    }
    const dropped: Command[] = [];
    if (terminal && to !== 'succeeded') {
      // The rest of the sequence is cancelled with it.
      const queue = [...followers];
      for (let follower = queue.shift(); follower; follower = queue.shift()) {
        dropped.push(follower);
        queue.push(...followersOf(follower));
      }
      for (const one of dropped) if (one.wake) wakes.push(one.wake);
    }
    // The wakes first: if one cannot be queued, the commands stay as they were (as the kernel's statement would).
    const seen = new Set<string>();
    for (const wake of wakes) {
      const id = keyOf(wake.kind, wake.key);
      if (seen.has(id) || !work) continue;
      seen.add(id);
      await work.enqueue(tx, { kind: wake.kind, key: wake.key, urgent: true });
    }
    for (const one of dropped) {
      byId.set(one.id, {
        ...one,
        state: 'cancelled',
        updatedAt: now,
        finishedAt: now,
        reason: to === 'cancelled' && next.reason !== undefined ? next.reason : `after ${current.key} ${to}`,
      });
    }
    byId.set(current.id, next);
    return next;
  }

  /** The pending commands that follow `command` in a sequence (`afterKey`). */
  function followersOf(command: Command): Command[] {
    return [...byId.values()].filter(
      (one) => one.state === 'pending' && one.nodeId === command.nodeId && one.afterKey === command.key,
    );
  }

  /** Whether a pending command still waits for the one it follows (its agent would not be given it yet). */
  function held(command: Command): boolean {
    if (command.state !== 'pending' || command.afterKey === undefined) return false;
    const id = byKey.get(keyOf(command.nodeId, command.afterKey));
    return id === undefined || byId.get(id)?.state !== 'succeeded';
  }

  async function expireIfDue(tx: SqlExecutor, command: Command): Promise<Command> {
    const now = clock.now();
    return isCommandDue(command, now) ? apply(tx, command, 'expired', now, { reason: EXPIRED_REASON }) : command;
  }

  async function move(tx: SqlExecutor, id: string, to: CommandState, change: Change = {}): Promise<Command> {
    requireText(id, ['commandId']);
    const stored = byId.get(id);
    if (!stored) throw notFound(id);
    const now = clock.now();
    const current = to === 'expired' ? stored : await expireIfDue(tx, stored);
    if (current.state === to && isTerminalCommandState(to)) return copy(current);
    assertCommandTransition(current.state, to, id);
    return copy(await apply(tx, current, to, now, change));
  }

  /** Walks an open command along the agent's path towards `to`, then makes the final move (which checks the rest). */
  async function drive(id: string, to: 'succeeded' | 'failed' | 'rejected', change: Change): Promise<Command> {
    requireText(id, ['commandId']);
    const stored = byId.get(id);
    if (!stored) throw notFound(id);
    const current = await expireIfDue(NO_TRANSACTION, stored);
    if (held(current)) {
      throw new ComputeError('INVALID_STATE', `command ${id} waits for ${current.afterKey} to succeed`, {
        details: { commandId: id, state: current.state, afterKey: current.afterKey },
      });
    }
    const path: CommandState[] =
      to === 'rejected' ? ['pending', 'dispatched'] : ['pending', 'dispatched', 'acked', 'running'];
    const at = path.indexOf(current.state);
    if (at >= 0) for (const step of path.slice(at + 1)) await move(NO_TRANSACTION, id, step);
    return move(NO_TRANSACTION, id, to, change);
  }

  function reasonOf(reason: unknown): string {
    return requireText(reason, ['reason'], MAX_COMMAND_REASON_LENGTH);
  }

  async function findByKey(sql: SqlExecutor, nodeId: string, key: string): Promise<Command | undefined> {
    requireText(nodeId, ['nodeId']);
    requireText(key, ['key']);
    const id = byKey.get(keyOf(nodeId, key));
    const stored = id === undefined ? undefined : byId.get(id);
    return stored ? copy(await expireIfDue(sql, stored)) : undefined;
  }

  return {
    async enqueue(tx, input) {
      const now = clock.now();
      checkNewCommand(input, clock);
      let payload: unknown = input.payload;
      if (kinds) {
        const kind = kinds.get(input.kind);
        if (!kind) {
          throw new ComputeError('INVALID_CONFIG', `unknown command kind ${input.kind}`, {
            details: { path: ['kind'], kind: input.kind },
          });
        }
        payload = await validateInput(kind.definition.payload, input.payload, ['payload']);
      }
      assertJson(payload, ['payload'], 'INVALID_INPUT');
      const existing = await findByKey(tx, input.nodeId, input.key);
      if (existing) return existing;
      const command: Command = {
        id: newId('cmd'),
        tenantId,
        nodeId: input.nodeId,
        kind: input.kind,
        payload: structuredClone(payload as Json),
        key: input.key,
        state: 'pending',
        notAfter: new Date(input.notAfter),
        createdAt: now,
        updatedAt: now,
      };
      if (input.batchId !== undefined) command.batchId = input.batchId;
      if (input.workflowId !== undefined) command.workflowId = input.workflowId;
      if (input.stepId !== undefined) command.stepId = input.stepId;
      if (input.targetNodeId !== undefined) command.targetNodeId = input.targetNodeId;
      if (input.wake !== undefined) command.wake = { kind: input.wake.kind, key: input.wake.key };
      if (input.wakeOn === 'failure') command.wakeOn = 'failure';
      if (input.afterKey !== undefined) command.afterKey = input.afterKey;
      byId.set(command.id, command);
      byKey.set(keyOf(command.nodeId, command.key), command.id);
      return copy(command);
    },

    async get(sql, id) {
      requireText(id, ['id']);
      const stored = byId.get(id);
      return stored ? copy(await expireIfDue(sql, stored)) : undefined;
    },

    findByKey,

    cancel: async (tx, id, reason) => move(tx, id, 'cancelled', { reason: reasonOf(reason) }),

    list: () =>
      [...byId.values()]
        .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
        .map(copy),

    async succeed(id, input = {}) {
      const change: Change = {};
      if (input.result !== undefined) change.result = encodeResult(input.result);
      if (input.attested !== undefined) {
        assertJson(input.attested, ['attested'], 'INVALID_INPUT');
        change.attested = input.attested;
      }
      return drive(id, 'succeeded', change);
    },

    fail: async (id, reason) => drive(id, 'failed', { reason: reasonOf(reason) }),

    reject: async (id, reason) => drive(id, 'rejected', { reason: reasonOf(reason) }),

    async expireDue(now) {
      const at = now ?? clock.now();
      if (!(at instanceof Date) || Number.isNaN(at.getTime())) throw invalid(['now'], 'now must be a valid Date');
      const expired: Command[] = [];
      for (const command of [...byId.values()].sort((a, b) => a.notAfter.getTime() - b.notAfter.getTime())) {
        if (isCommandDue(command, at)) {
          expired.push(copy(await apply(NO_TRANSACTION, command, 'expired', at, { reason: EXPIRED_REASON })));
        }
      }
      return expired;
    },
  };
}
