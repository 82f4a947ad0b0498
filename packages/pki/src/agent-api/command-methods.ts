import { type Command, ComputeError } from '@better-compute/core';
import { requireText } from '@better-compute/core/checks';
import { type AgentApiContext, type AgentCall, type AgentMethod, callerOf } from './context';
import { parseCompleteBody, parsePollBody, requireBody, requireCommandId, requireReason } from './validate';

/** A command as an agent receives it. `notAfter` is ISO 8601; the optional fields appear only when set. */
export interface AgentCommand {
  id: string;
  kind: string;
  payload: unknown;
  key: string;
  notAfter: string;
  targetNodeId?: string;
  batchId?: string;
  workflowId?: string;
  stepId?: string;
}

/**
 * A command in the shape the agent API answers with.
 *
 * @example
 * ```ts
 * const { commands } = { commands: polled.map(agentCommand) };
 * ```
 */
export function agentCommand(command: Command): AgentCommand {
  return {
    id: command.id,
    kind: command.kind,
    payload: command.payload,
    key: command.key,
    notAfter: command.notAfter.toISOString(),
    ...(command.targetNodeId ? { targetNodeId: command.targetNodeId } : {}),
    ...(command.batchId ? { batchId: command.batchId } : {}),
    ...(command.workflowId ? { workflowId: command.workflowId } : {}),
    ...(command.stepId ? { stepId: command.stepId } : {}),
  };
}

// Polls at once; when there is nothing and the caller asked to wait, holds the request until a command for the node
// is enqueued (the NOTIFY), the re-check timer fires (then polls again), the bound passes or the client goes away.
async function poll(ctx: AgentApiContext, call: AgentCall): Promise<{ commands: AgentCommand[] }> {
  const { nodeId } = callerOf(call);
  const { limit, waitMs } = parsePollBody(call.body);
  const { compute } = ctx;
  const deadline = Date.now() + Math.min(waitMs, ctx.longPollMaxMs);
  if (waitMs > 0) await ctx.waiters.listen();
  let woken = false;
  for (;;) {
    // Registered before the poll reads, so a command committed between the read and the wait still wakes it.
    const waiter = ctx.waiters.register(nodeId);
    try {
      // Unless a notification said a command came, one lock-free read first: most polls (the first of a held poll, every
      // re-check) find nothing, and the poll's transaction costs four round trips. pollCommands runs in a transaction of
      // its own: handed the database, that is the transaction, without an outer one around it.
      const worthPolling = woken || (await compute.commands.hasCommandsToPoll(compute.database, { nodeId }));
      const polled = worthPolling
        ? await compute.commands.pollCommands(compute.database, limit === undefined ? { nodeId } : { nodeId, limit })
        : [];
      const remaining = deadline - Date.now();
      if (polled.length > 0 || remaining <= 0 || call.signal.aborted) return { commands: polled.map(agentCommand) };
      const outcome = await waiter.wait(Math.min(remaining, ctx.recheckMs), call.signal);
      if (outcome === 'aborted') return { commands: [] };
      woken = outcome === 'woken';
    } finally {
      waiter.release();
    }
  }
}

function move(kind: 'ackCommand' | 'startCommand'): AgentMethod {
  return {
    authenticated: true,
    async run(ctx, call) {
      const { nodeId } = callerOf(call);
      const commandId = requireCommandId(requireBody(call.body, ['commandId']).commandId);
      // One statement in the common case, and a transaction of its own otherwise (the kernel's move): no transaction
      // around it, which would cost two round trips more on every call.
      const moved = await ctx.compute.commands[kind](ctx.compute.database, { nodeId, commandId });
      return { commandId: moved.id, state: moved.state };
    },
  };
}

function settle(kind: 'failCommand' | 'rejectCommand'): AgentMethod {
  return {
    authenticated: true,
    async run(ctx, call) {
      const { nodeId } = callerOf(call);
      const body = requireBody(call.body, ['commandId', 'reason']);
      const commandId = requireCommandId(body.commandId);
      const reason = requireReason(body.reason);
      // As ack and start: the kernel's move is one statement or a transaction of its own.
      const moved = await ctx.compute.commands[kind](ctx.compute.database, { nodeId, commandId, reason });
      return { commandId: moved.id, state: moved.state };
    },
  };
}

function notCarried(path: string): ComputeError {
  return new ComputeError('NOT_FOUND', 'no such secret for this agent', {
    details: { path: [path], reason: 'not-carried' },
  });
}

// The broker's rule (a live step command of this agent carries the ref); with a commandId, that very command must be
// the agent's, live and carry it. The value is never logged. A grant is one statement (the broker's); only a refusal
// reads the command, to say whether the command itself is unknown to the agent.
async function fetchSecret(ctx: AgentApiContext, call: AgentCall): Promise<{ value: string }> {
  const { nodeId } = callerOf(call);
  const body = requireBody(call.body, ['commandId', 'ref']);
  const ref = requireText(body.ref, ['ref'], { max: 128 });
  if (body.commandId !== undefined) {
    const commandId = requireCommandId(body.commandId);
    try {
      const value = await ctx.pki.fetchSecretForAgent(ctx.compute.database, { agentNodeId: nodeId, ref, commandId });
      return { value };
    } catch (error) {
      if (!(error instanceof ComputeError) || error.code !== 'NOT_FOUND') throw error;
      const command = await ctx.compute.commands.get(ctx.compute.database, commandId);
      if (!command || command.nodeId !== nodeId) {
        throw new ComputeError('NOT_FOUND', `command ${commandId} not found`, { details: { path: ['commandId'] } });
      }
      throw notCarried('ref');
    }
  }
  const value = await ctx.pki.fetchSecretForAgent(ctx.compute.database, { agentNodeId: nodeId, ref });
  return { value };
}

/**
 * The command methods of the agent API: `commands.poll` (long poll), `commands.ack`, `commands.start`,
 * `commands.complete`, `commands.fail`, `commands.reject`, and `secrets.fetch`. Each acts as the certificate's node;
 * another node's command id is NOT_FOUND (the kernel's queue checks the owner in the statement that moves it).
 *
 * @example
 * ```ts
 * const result = await COMMAND_METHODS['commands.ack'].run(ctx, { body: { commandId }, caller, signal });
 * ```
 */
export const COMMAND_METHODS: Readonly<Record<string, AgentMethod>> = {
  'commands.poll': { authenticated: true, run: poll },
  'commands.ack': move('ackCommand'),
  'commands.start': move('startCommand'),
  'commands.complete': {
    authenticated: true,
    async run(ctx, call) {
      const { nodeId } = callerOf(call);
      const { commandId, result, attested } = parseCompleteBody(call.body);
      // As ack and start: the kernel's move is one statement (the wake queued by it too) or a transaction of its own.
      const moved = await ctx.compute.commands.completeCommand(ctx.compute.database, {
        nodeId,
        commandId,
        ...(result === undefined ? {} : { result }),
        ...(attested === undefined ? {} : { attested: { ...attested } }),
      });
      return { commandId: moved.id, state: moved.state };
    },
  },
  'commands.fail': settle('failCommand'),
  'commands.reject': settle('rejectCommand'),
  'secrets.fetch': { authenticated: true, run: fetchSecret },
};
