import { type Command, ComputeError, type Json } from '@better-compute/core';
import { addMs } from '@better-compute/core/kernel';
import type { StepContext } from '../define/types';
import { ENGINE_DEFAULTS } from '../engine/constants';
import { stepNotReady } from '../engine/step-not-ready';
import { stepCommandKey } from './step-command-key';

/** What {@link awaitCommand} sends. */
export interface AwaitCommandInput {
  nodeId: string;
  kind: string;
  payload: Json;
  /** Tells apart several commands of one step (`'boot-device'`, `'power-cycle'`). */
  key?: string;
  /** How long the command may wait for its agent: `notAfter` is now plus this. Default 10 minutes. */
  timeoutMs?: number;
  /** The machine a site agent acts on, for commands relayed through the site. */
  targetNodeId?: string;
}

/** A succeeded command as {@link awaitCommand} returns it: the agent's raw result bytes and its signed claim. */
export interface AwaitedCommand {
  commandId: string;
  result: Uint8Array | undefined;
  attested: Json | undefined;
}

const OPEN = new Set(['pending', 'dispatched', 'acked', 'running']);

function commandEnded(command: Command): ComputeError {
  const reason = command.reason ? `: ${command.reason}` : '';
  return new ComputeError('DRIVER_ERROR', `command ${command.kind} ${command.state}${reason}`, {
    details: { commandId: command.id, state: command.state, reason: command.reason ?? command.state },
  });
}

/**
 * Find-before-create for a step's command: looks it up by `wf:<id>:<step>#<attempt>[:<key>]` on that node, enqueues
 * it only if absent (with `notAfter` now plus `timeoutMs`, and the workflow's batch on destructive kinds only), then
 * throws `stepNotReady(2000)` while it is open, returns `{ commandId, result, attested }` once it succeeded, and
 * throws `DRIVER_ERROR` with the state and reason once it failed, was rejected, expired or was cancelled.
 *
 * @example
 * ```ts
 * const { result } = await awaitCommand(ctx, { nodeId: agent.nodeId, kind: 'site.httpProxy', payload, key: 'version' });
 * ```
 */
export async function awaitCommand(ctx: StepContext, input: AwaitCommandInput): Promise<AwaitedCommand> {
  const key = stepCommandKey(ctx, input.key);
  const timeoutMs = input.timeoutMs ?? ENGINE_DEFAULTS.awaitCommandTimeoutMs;
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) {
    throw new ComputeError('INVALID_INPUT', 'timeoutMs must be a positive whole number of milliseconds', {
      details: { path: ['timeoutMs'] },
    });
  }
  let command = await ctx.commands.findByKey(ctx.sql, input.nodeId, key);
  if (!command) {
    const destructive = ctx.commandKinds.get(input.kind)?.definition.destructive === true;
    command = await ctx.sql.transaction((tx) =>
      ctx.commands.enqueue(tx, {
        nodeId: input.nodeId,
        kind: input.kind,
        payload: input.payload,
        key,
        notAfter: addMs(ctx.clock.now(), timeoutMs),
        ...(destructive && ctx.batchId ? { batchId: ctx.batchId } : {}),
        ...(input.targetNodeId ? { targetNodeId: input.targetNodeId } : {}),
      }),
    );
  }
  if (OPEN.has(command.state)) throw stepNotReady(ENGINE_DEFAULTS.commandStepPollMs);
  if (command.state !== 'succeeded') throw commandEnded(command);
  return { commandId: command.id, result: command.result, attested: command.attested };
}
