import { randomUUID } from 'node:crypto';
import { type Clock, type Command, type Compute, isComputeError, type Json } from '@better-compute/core';
import {
  type AgentRole,
  type AgentSession,
  closeAgentSession,
  MAX_POLL_LIMIT,
  openAgentSession,
  touchAgentSession,
} from '@better-compute/core/kernel';
import { encodeResult } from '../result-bytes';

/**
 * How a simulated agent settles one command it acked: `succeed` (with `after`, run after the completion is committed:
 * a kexec or a reboot), `fail`, `reject`, or `hang` (started, never finished: a command that hangs).
 */
export type SimOutcome =
  | {
      outcome: 'succeed';
      result?: Json | Uint8Array;
      attested?: Json;
      /** The agent signs the result bytes with its own key (an agent over HTTP; see `MachineIdentity`). */
      sign?: boolean;
      after?: () => Promise<void>;
    }
  | { outcome: 'fail'; reason: string }
  | { outcome: 'reject'; reason: string }
  | { outcome: 'hang' };

/** What a simulated agent did with one command, in order. */
export interface SimCommandRecord {
  commandId: string;
  /** The agent that ran it (a site agent, or the machine's ramdisk or OS). */
  agentNodeId: string;
  role: AgentRole;
  kind: string;
  key: string;
  targetNodeId?: string;
  /** For `driver.invoke`, the operation (`power.setPower`, …). */
  operation?: string;
  payload: Json;
  outcome: SimOutcome['outcome'];
  reason?: string;
  destructive: boolean;
}

/** Runs one command (acked, so still live: a secret it carries can be fetched) and says how it ended. */
export type SimHandler = (command: Command, agent: SimAgent) => Promise<SimOutcome>;

/**
 * An agent of the simulation speaking to the kernel as the agent API does (a session; poll, ack, start and settle,
 * each call its own transaction). Its role and boot id change as the machine boots.
 */
export interface SimAgent {
  readonly nodeId: string;
  readonly role: AgentRole | undefined;
  readonly bootId: string | undefined;
  readonly session: AgentSession | undefined;
  /** False while offline: it neither polls nor touches its session (which goes stale after a minute). */
  online: boolean;
  /** Opens a session as a new boot (a fresh boot id unless given), closing the node's previous one. */
  connect(role: AgentRole, bootId?: string): Promise<AgentSession>;
  /** Closes its session (the process is gone: power off, kexec, reboot). */
  disconnect(): Promise<void>;
  /** Polls and runs its commands; returns how many it handled. Offline or disconnected: 0. */
  poll(): Promise<number>;
}

export interface SimAgentDeps {
  compute: Compute;
  clock: Clock;
  nodeId: string;
  handle: SimHandler;
  isDestructive: (kind: string) => boolean;
  record: (entry: SimCommandRecord) => void;
}

/** Makes a {@link SimAgent}. */
export function createSimAgent(deps: SimAgentDeps): SimAgent {
  const { compute, clock, nodeId } = deps;
  const db = compute.database;
  let session: AgentSession | undefined;
  const handled = new Set<string>();

  async function run(command: Command, role: AgentRole): Promise<void> {
    handled.add(command.id);
    const ref = { nodeId, commandId: command.id };
    const { commands } = compute;
    await db.transaction((tx) => commands.ackCommand(tx, ref));
    const outcome = await deps.handle(command, agent);
    const payload = command.payload as { operation?: unknown } | null;
    deps.record({
      commandId: command.id,
      agentNodeId: nodeId,
      role,
      kind: command.kind,
      key: command.key,
      ...(command.targetNodeId ? { targetNodeId: command.targetNodeId } : {}),
      ...(command.kind === 'driver.invoke' && typeof payload?.operation === 'string'
        ? { operation: payload.operation }
        : {}),
      payload: command.payload,
      outcome: outcome.outcome,
      ...('reason' in outcome ? { reason: outcome.reason } : {}),
      destructive: deps.isDestructive(command.kind),
    });
    if (outcome.outcome === 'reject') {
      await db.transaction((tx) => commands.rejectCommand(tx, { ...ref, reason: outcome.reason }));
      return;
    }
    await db.transaction((tx) => commands.startCommand(tx, ref));
    if (outcome.outcome === 'hang') return;
    if (outcome.outcome === 'fail') {
      await db.transaction((tx) => commands.failCommand(tx, { ...ref, reason: outcome.reason }));
      return;
    }
    await db.transaction((tx) =>
      commands.completeCommand(tx, {
        ...ref,
        ...(outcome.result === undefined ? {} : { result: encodeResult(outcome.result) }),
        ...(outcome.attested === undefined ? {} : { attested: outcome.attested }),
      }),
    );
    await outcome.after?.();
  }

  const agent: SimAgent = {
    nodeId,
    online: true,
    get role() {
      return session?.role;
    },
    get bootId() {
      return session?.bootId;
    },
    get session() {
      return session ? { ...session } : undefined;
    },
    async connect(role, bootId = randomUUID()) {
      session = await db.transaction((tx) => openAgentSession(tx, { nodeId, role, bootId, clock }));
      return { ...session };
    },
    async disconnect() {
      const current = session;
      session = undefined;
      if (current) await db.transaction((tx) => closeAgentSession(tx, { sessionId: current.id, clock }));
    },
    async poll() {
      const current = session;
      if (!current || !agent.online) return 0;
      let polled: Command[];
      try {
        polled = await db.transaction(async (tx) => {
          await touchAgentSession(tx, { sessionId: current.id, clock });
          return compute.commands.pollCommands(tx, { nodeId, limit: MAX_POLL_LIMIT });
        });
      } catch (error) {
        if (isComputeError(error, 'INVALID_STATE') && error.details.reason === 'session-closed') {
          if (session === current) session = undefined;
          return 0;
        }
        throw error;
      }
      let count = 0;
      for (const command of polled) {
        // A real agent keeps the ids it ran: a command is run once, whatever a later poll returns.
        if (handled.has(command.id)) continue;
        // A command that arrived for a boot that has since ended (the machine rebooted under it) is not run.
        if (session !== current) break;
        await run(command, current.role);
        count += 1;
      }
      return count;
    },
  };
  return agent;
}
