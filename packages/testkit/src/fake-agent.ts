import { randomUUID } from 'node:crypto';
import { type Clock, type Command, type Compute, ComputeError, isComputeError, type Json } from '@better-compute/core';
import {
  type AgentRole,
  type AgentSession,
  closeAgentSession,
  MAX_POLL_LIMIT,
  openAgentSession,
  touchAgentSession,
} from '@better-compute/core/kernel';
import { encodeResult } from './result-bytes';

/**
 * How a {@link FakeAgent} answers a command:
 *
 * - `succeed`: ack, start, complete with `result` (bytes, or JSON stored as its UTF-8 text) and `attested`;
 * - `fail` / `reject`: ack, start, fail — or ack, reject — with `reason`;
 * - `silent`: ack and start, never finish (the command stays `running` until it expires or is cancelled);
 * - `ignore`: never answer (the poll still marks it `dispatched`, as any poll does, and it stays so).
 *
 * @example
 * ```ts
 * const ok: AgentBehavior = { outcome: 'succeed', result: { disks: 2 } };
 * const refuse: AgentBehavior = { outcome: 'reject', reason: 'unsupported firmware' };
 * ```
 */
export type AgentBehavior =
  | { outcome: 'succeed'; result?: Json | Uint8Array; attested?: Json }
  | { outcome: 'fail'; reason: string }
  | { outcome: 'reject'; reason: string }
  | { outcome: 'silent' }
  | { outcome: 'ignore' };

/**
 * A behavior, or a function choosing one per command.
 *
 * @example
 * ```ts
 * const flaky: AgentResponder = (command) =>
 *   command.key.endsWith(':1') ? { outcome: 'fail', reason: 'disk busy' } : { outcome: 'succeed' };
 * ```
 */
export type AgentResponder = AgentBehavior | ((command: Command) => AgentBehavior);

/**
 * What a fake agent did with one command, in the order it did it. `ignore` is never recorded.
 *
 * @example
 * ```ts
 * expect(agent.answered).toEqual([{ commandId, kind: 'disk.wipe', key: 'wf:1:wipe', outcome: 'succeed' }]);
 * ```
 */
export interface AnsweredCommand {
  commandId: string;
  kind: string;
  key: string;
  outcome: Exclude<AgentBehavior['outcome'], 'ignore'>;
}

/**
 * What {@link createFakeAgent} takes.
 *
 * @example
 * ```ts
 * const options: FakeAgentOptions = { nodeId, role: 'ramdisk', bootId: 'boot-1', clock };
 * ```
 */
export interface FakeAgentOptions {
  /** The agent's node (a `nodes` row; see `insertNode`). */
  nodeId: string;
  role: AgentRole;
  /** Default: a fresh random UUID. */
  bootId?: string;
  /** Stamps its session; default the compute's clock (`compute.context.clock`). */
  clock?: Clock;
}

/**
 * An agent simulated in process, speaking to the kernel the way the agent API does: a session, then poll, ack, start
 * and complete / fail / reject, each answer in its own transaction as a real agent's separate HTTP calls would be.
 *
 * @example
 * ```ts
 * const agent: FakeAgent = createFakeAgent(compute, { nodeId, role: 'ramdisk' });
 * await agent.connect();
 * agent.respond('disk.wipe', { outcome: 'fail', reason: 'disk busy' });
 * await agent.poll();
 * agent.answered; // [{ commandId, kind: 'disk.wipe', key, outcome: 'fail' }]
 * ```
 */
export interface FakeAgent {
  readonly nodeId: string;
  readonly role: AgentRole;
  readonly bootId: string;
  /** The open session, once connected; undefined when disconnected. */
  readonly session: AgentSession | undefined;
  readonly connected: boolean;
  /** What it answered so far (copies), oldest first. */
  readonly answered: readonly AnsweredCommand[];
  /** Opens a session with its boot id and role (closing the node's previous open one). */
  connect(): Promise<AgentSession>;
  /** Closes its session; a disconnected agent's `poll()` does nothing. */
  disconnect(): Promise<void>;
  /** Comes back as a new boot: a new session with a new boot id (default a fresh random one), optionally a new role. */
  rejoin(options?: { bootId?: string; role?: AgentRole }): Promise<AgentSession>;
  /** Sets how it answers every kind without a behavior of its own. */
  respond(behavior: AgentResponder): void;
  /** Sets how it answers one kind. */
  respond(kind: string, behavior: AgentResponder): void;
  /**
   * When connected: touches its session, polls its commands, and answers each per its behavior. Returns how many
   * commands it answered (settled, or for `silent` acked and started); ignored ones count 0. Disconnected: does
   * nothing and returns 0.
   */
  poll(): Promise<number>;
}

const SUCCEED: AgentBehavior = { outcome: 'succeed' };

function checkBootId(bootId: unknown): string {
  if (typeof bootId !== 'string' || bootId.length === 0 || bootId.length > 512) {
    throw new ComputeError('INVALID_INPUT', 'bootId must be a non-empty string of at most 512 characters', {
      details: { path: ['bootId'] },
    });
  }
  return bootId;
}

function checkBehavior(behavior: unknown, allowFunction = true): AgentResponder {
  if (allowFunction && typeof behavior === 'function') return behavior as AgentResponder;
  const outcome = (behavior as { outcome?: unknown } | null)?.outcome;
  if (!['succeed', 'fail', 'reject', 'silent', 'ignore'].includes(outcome as string)) {
    throw new ComputeError(
      'INVALID_INPUT',
      "an agent behavior is { outcome: 'succeed' | 'fail' | 'reject' | 'silent' | 'ignore' } or a function",
      { details: { path: ['behavior', 'outcome'] } },
    );
  }
  return behavior as AgentBehavior;
}

/**
 * Makes a {@link FakeAgent} for one node of `compute`. It starts disconnected; by default it succeeds every command
 * with no result. A session closed under it (another agent opened one for the node) makes it disconnected at its next
 * poll, as a superseded boot would be.
 *
 * @example
 * ```ts
 * const nodeId = await insertNode(compute.database, {}, clock);
 * const agent = createFakeAgent(compute, { nodeId, role: 'node' });
 * await agent.connect();
 * await settle(compute, { clock, agents: [agent] });
 * await agent.rejoin({ role: 'provisioned' }); // a new boot id, visible through currentAgentSession
 * ```
 */
export function createFakeAgent(compute: Compute, options: FakeAgentOptions): FakeAgent {
  const { nodeId } = options;
  const clock = options.clock ?? compute.context.clock;
  const db = compute.database;
  let role = options.role;
  let bootId = checkBootId(options.bootId ?? randomUUID());
  let session: AgentSession | undefined;
  let fallback: AgentResponder = SUCCEED;
  const byKind = new Map<string, AgentResponder>();
  const answered: AnsweredCommand[] = [];

  async function open(asRole: AgentRole, asBoot: string): Promise<AgentSession> {
    session = await db.transaction((tx) => openAgentSession(tx, { nodeId, role: asRole, bootId: asBoot, clock }));
    return { ...session };
  }

  function behaviorFor(command: Command): AgentBehavior {
    const responder = byKind.get(command.kind) ?? fallback;
    return typeof responder === 'function' ? (checkBehavior(responder(command), false) as AgentBehavior) : responder;
  }

  /** Answers one polled (dispatched) command, one transaction per call, as the agent API would see it. */
  async function answer(command: Command, behavior: Exclude<AgentBehavior, { outcome: 'ignore' }>): Promise<void> {
    const ref = { nodeId, commandId: command.id };
    const { commands } = compute;
    await db.transaction((tx) => commands.ackCommand(tx, ref));
    if (behavior.outcome === 'reject') {
      await db.transaction((tx) => commands.rejectCommand(tx, { ...ref, reason: behavior.reason }));
    } else {
      await db.transaction((tx) => commands.startCommand(tx, ref));
      if (behavior.outcome === 'succeed') {
        const input = {
          ...ref,
          ...(behavior.result === undefined ? {} : { result: encodeResult(behavior.result) }),
          ...(behavior.attested === undefined ? {} : { attested: behavior.attested }),
        };
        await db.transaction((tx) => commands.completeCommand(tx, input));
      } else if (behavior.outcome === 'fail') {
        await db.transaction((tx) => commands.failCommand(tx, { ...ref, reason: behavior.reason }));
      }
    }
    answered.push({ commandId: command.id, kind: command.kind, key: command.key, outcome: behavior.outcome });
  }

  return {
    nodeId,
    get role() {
      return role;
    },
    get bootId() {
      return bootId;
    },
    get session() {
      return session ? { ...session } : undefined;
    },
    get connected() {
      return session !== undefined;
    },
    get answered() {
      return answered.map((entry) => ({ ...entry }));
    },
    connect: () => open(role, bootId),
    async disconnect() {
      const current = session;
      session = undefined;
      if (current) await db.transaction((tx) => closeAgentSession(tx, { sessionId: current.id, clock }));
    },
    async rejoin(rejoinOptions = {}) {
      const nextBootId = checkBootId(rejoinOptions.bootId ?? randomUUID());
      const nextRole = rejoinOptions.role ?? role;
      const opened = await open(nextRole, nextBootId);
      role = nextRole;
      bootId = nextBootId;
      return opened;
    },
    respond(kindOrBehavior: string | AgentResponder, behavior?: AgentResponder): void {
      if (typeof kindOrBehavior === 'string') {
        byKind.set(kindOrBehavior, checkBehavior(behavior));
      } else {
        fallback = checkBehavior(kindOrBehavior);
      }
    },
    async poll() {
      const current = session;
      if (!current) return 0;
      let commands: Command[];
      try {
        commands = await db.transaction(async (tx) => {
          await touchAgentSession(tx, { sessionId: current.id, clock });
          return compute.commands.pollCommands(tx, { nodeId, limit: MAX_POLL_LIMIT });
        });
      } catch (err) {
        if (isComputeError(err, 'INVALID_STATE') && err.details.reason === 'session-closed') {
          session = undefined;
          return 0;
        }
        throw err;
      }
      let answeredNow = 0;
      for (const command of commands) {
        const behavior = behaviorFor(command);
        if (behavior.outcome === 'ignore') continue;
        await answer(command, behavior);
        answeredNow += 1;
      }
      return answeredNow;
    },
  };
}
