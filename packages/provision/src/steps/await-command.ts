import { type Command, ComputeError, type ErrorPath, type Json, type NewCommand } from '@better-compute/core';
import { addMs, isCommandDue, type StagedWrite } from '@better-compute/core/kernel';
import type { StepContext } from '../define/types';
import { ENGINE_DEFAULTS } from '../engine/constants';
import { type StepSend, sendCommand } from '../engine/run-gate';
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
  /**
   * Which ends of the command run the step again at once: any (`'settle'`, the default) or only a failure
   * (`'failure'`), for a command whose success alone lets the step finish nothing (a power cycle before waiting for
   * the machine's agent to join, which queues the workflow itself). The step still sees the success on its next run.
   */
  wakeOn?: 'settle' | 'failure';
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

function positiveMs(value: number, path: ErrorPath, name: string): number {
  if (!Number.isInteger(value) || value <= 0) {
    throw new ComputeError('INVALID_INPUT', `${name} must be a positive whole number of milliseconds`, {
      details: { path },
    });
  }
  return value;
}

/** One command of a step as awaitCommand(s) judge it: its full key, the command as found (null: none), its send. */
interface Looked {
  key: string;
  pollMs: number;
  command: Command | null;
  send: (afterKey: string | undefined) => StepSend;
}

/** Checks `input` (paths under `at`) and finds its command: what the step read, the claim read, or a lookup. */
async function lookUp(ctx: StepContext, input: AwaitCommandInput, at: ErrorPath): Promise<Looked> {
  const key = stepCommandKey(ctx, input.key);
  const timeoutMs = positiveMs(
    input.timeoutMs ?? ENGINE_DEFAULTS.awaitCommandTimeoutMs,
    [...at, 'timeoutMs'],
    'timeoutMs',
  );
  const pollMs = positiveMs(input.pollMs ?? ENGINE_DEFAULTS.commandStepPollMs, [...at, 'pollMs'], 'pollMs');
  let command =
    input.found !== undefined ? input.found : (ctx.commands as StepCommandQueue).preloaded?.(input.nodeId, key);
  if (command === undefined) command = await ctx.commands.findByKey(ctx.sql, input.nodeId, key);
  // What the step read may be open past its deadline: the queue's own read expires it (lazy expiry, as findByKey).
  if (command && isCommandDue(command, ctx.clock.now())) {
    command = await ctx.commands.findByKey(ctx.sql, input.nodeId, key);
  }
  const send = (afterKey: string | undefined): StepSend => {
    const destructive = ctx.commandKinds.get(input.kind)?.definition.destructive === true;
    const command: NewCommand = {
      nodeId: input.nodeId,
      kind: input.kind,
      payload: input.payload,
      key,
      notAfter: addMs(ctx.clock.now(), timeoutMs),
      ...(destructive && ctx.batchId ? { batchId: ctx.batchId } : {}),
      ...(input.targetNodeId ? { targetNodeId: input.targetNodeId } : {}),
      ...(input.wakeOn === 'failure' ? { wakeOn: 'failure' as const } : {}),
      ...(afterKey ? { afterKey } : {}),
    };
    return { command, with_: input.with };
  };
  return { key, pollMs, command: command ?? null, send };
}

/**
 * Sends commands absent a moment ago, together: held by the engine to be written with the end of the pass (its
 * requeue in the same statement) or by the run's next statement, when it can; else now (see `sendCommand`). Undefined
 * when they are held or one statement wrote them (they are `pending`).
 */
async function send(ctx: StepContext, sends: readonly [StepSend, ...StepSend[]]): Promise<Command[] | undefined> {
  const queue = ctx.commands as StepCommandQueue;
  if (queue.hold && (await queue.hold(sends))) return undefined;
  return sendCommand(ctx, sends);
}

function awaited(command: Command): AwaitedCommand {
  return { commandId: command.id, result: command.result, attested: command.attested };
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
  const looked = await lookUp(ctx, input, []);
  let command = looked.command;
  if (!command) {
    const found = await send(ctx, [looked.send(undefined)]);
    if (!found?.[0]) throw stepNotReady(looked.pollMs);
    command = found[0];
  }
  if (OPEN.has(command.state)) throw stepNotReady(looked.pollMs);
  if (command.state !== 'succeeded') throw commandEnded(command);
  return awaited(command);
}

/**
 * Find-before-create for a sequence of a step's commands to one node (a one-time boot device, a boot entry, a power
 * cycle), each under its own `key`: the ones absent are sent together, by one statement, each following the one
 * before it (`afterKey`), so the agent is given each only once the one before it succeeded, and a failure cancels the
 * rest; a command that succeeds with another following it does not run the step again (the last one's end does).
 * Returns every command's `{ commandId, result, attested }` once all succeeded; throws `stepNotReady` (the first
 * input's `pollMs`) while any is open, and the first failed, rejected, expired or cancelled one's `DRIVER_ERROR`, in
 * order. A re-run finds what was sent by key and sends only what is missing. Commands for different nodes are
 * INVALID_INPUT (`details.path: [i, 'nodeId']`); so is an empty list.
 *
 * @example
 * ```ts
 * const [, , cycled] = await awaitCommands(ctx, [bootDevice, bootEntry, { ...powerCycle, wakeOn: 'failure' }]);
 * ```
 */
export async function awaitCommands(ctx: StepContext, inputs: readonly AwaitCommandInput[]): Promise<AwaitedCommand[]> {
  const [head] = inputs;
  if (!head) {
    throw new ComputeError('INVALID_INPUT', 'awaitCommands needs at least one command', { details: { path: [] } });
  }
  for (const [index, input] of inputs.entries()) {
    if (input.nodeId !== head.nodeId) {
      throw new ComputeError('INVALID_INPUT', 'the commands of one sequence go to one node', {
        details: { path: [index, 'nodeId'] },
      });
    }
  }
  const looked = await Promise.all(inputs.map((input, index) => lookUp(ctx, input, [index])));
  const results: AwaitedCommand[] = [];
  const missing: StepSend[] = [];
  // The key the next command must follow: the one before it, while that one has not succeeded.
  let follow: string | undefined;
  for (const one of looked) {
    const { command } = one;
    if (!command) {
      missing.push(one.send(follow));
      follow = one.key;
    } else if (OPEN.has(command.state)) {
      follow = one.key;
    } else if (command.state !== 'succeeded') {
      throw commandEnded(command);
    } else {
      results.push(awaited(command));
      follow = undefined;
    }
  }
  const [first, ...rest] = missing;
  if (first) await send(ctx, [first, ...rest]);
  if (results.length < looked.length) throw stepNotReady(looked[0]?.pollMs ?? ENGINE_DEFAULTS.commandStepPollMs);
  return results;
}
