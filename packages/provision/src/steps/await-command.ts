import { type Command, ComputeError, type Json, type NewCommand } from '@better-compute/core';
import { addMs, isCommandDue, type StagedWrite } from '@better-compute/core/kernel';
import type { StepContext } from '../define/types';
import { ENGINE_DEFAULTS } from '../engine/constants';
import { sendCommand } from '../engine/run-gate';
import type { StepCommandQueue } from '../engine/step-context';
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
  /**
   * How long to wait before running the step again while the command is open. Default 2,000 ms
   * (`commandStepPollMs`). The command's settle (a result, a rejection, lazy or swept expiry) queues the workflow in
   * its own statement, so the step runs again at once whatever this is: a longer value only makes the fallback look
   * rarer, for steps whose commands take minutes (an image write, a burn-in).
   */
  pollMs?: number;
  /** The machine a site agent acts on, for commands relayed through the site. */
  targetNodeId?: string;
  /**
   * The command under this key on `nodeId` as the step already read it in this run (`null`: it read and found none),
   * so a step that reads its commands together does not pay a lookup per command. Left out, awaitCommand takes what
   * the claim read for this run (`ctx.preloads`), or looks it up.
   * A command found open past its `notAfter` is read again (and so expired) before it is judged.
   */
  found?: Command | null;
  /**
   * What is written with the command, by the statement (or transaction) that sends it, and only if this call sends
   * it: a join token the payload references by its secret (`ctx.pki.stageJoinTokenSecret`), so that it exists
   * exactly when the command does. Not written when the command is found already sent.
   */
  with?: StagedWrite;
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
 * Sends a command absent a moment ago: held by the engine to be written with the end of the pass (its requeue in the
 * same statement) or by the run's next statement, when it can; else now (see `sendCommand`). Undefined when it is
 * held or one statement wrote it (it is `pending`).
 */
async function send(ctx: StepContext, command: NewCommand, with_?: StagedWrite): Promise<Command | undefined> {
  const queue = ctx.commands as StepCommandQueue;
  if (queue.hold && (await queue.hold(command, with_))) return undefined;
  return sendCommand(ctx, command, with_);
}

/**
 * Find-before-create for a step's command: looks it up by `wf:<id>:<step>#<attempt>[:<key>]` on that node (or takes
 * `found`, what the step already read), enqueues it only if absent (with `notAfter` now plus `timeoutMs`, and the
 * workflow's batch on destructive kinds only), then throws `stepNotReady(2000)` (or `pollMs`) while it is open, returns
 * `{ commandId, result, attested }` once it succeeded, and throws `DRIVER_ERROR` with the state and reason once it
 * failed, was rejected, expired or was cancelled.
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
  const pollMs = input.pollMs ?? ENGINE_DEFAULTS.commandStepPollMs;
  if (!Number.isInteger(pollMs) || pollMs <= 0) {
    throw new ComputeError('INVALID_INPUT', 'pollMs must be a positive whole number of milliseconds', {
      details: { path: ['pollMs'] },
    });
  }
  // What the step read, else what the claim read for this run (see StepPreloads), else a lookup of its own.
  let command =
    input.found !== undefined ? input.found : (ctx.commands as StepCommandQueue).preloaded?.(input.nodeId, key);
  if (command === undefined) command = await ctx.commands.findByKey(ctx.sql, input.nodeId, key);
  // What the step read may be open past its deadline: the queue's own read expires it (lazy expiry, as findByKey).
  if (command && isCommandDue(command, ctx.clock.now())) {
    command = await ctx.commands.findByKey(ctx.sql, input.nodeId, key);
  }
  if (!command) {
    const destructive = ctx.commandKinds.get(input.kind)?.definition.destructive === true;
    command = await send(
      ctx,
      {
        nodeId: input.nodeId,
        kind: input.kind,
        payload: input.payload,
        key,
        notAfter: addMs(ctx.clock.now(), timeoutMs),
        ...(destructive && ctx.batchId ? { batchId: ctx.batchId } : {}),
        ...(input.targetNodeId ? { targetNodeId: input.targetNodeId } : {}),
      },
      input.with,
    );
    if (!command) throw stepNotReady(pollMs);
  }
  if (OPEN.has(command.state)) throw stepNotReady(pollMs);
  if (command.state !== 'succeeded') throw commandEnded(command);
  return { commandId: command.id, result: command.result, attested: command.attested };
}
