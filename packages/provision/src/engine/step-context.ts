import {
  type Command,
  type CommandQueue,
  ComputeError,
  type IssueJoinTokenInput,
  type ModuleContext,
  type NewCommand,
  type PkiPort,
} from '@better-compute/core';
import type { CommandStaging, StagedWrite } from '@better-compute/core/kernel';
import type { StepContext, StepPreloads } from '../define/types';
import { WORKFLOW_WORK_KIND } from './constants';
import type { RunRequest } from './decision';
import type { RunGate, StepSend } from './run-gate';

/**
 * The command queue a step sees: every command it enqueues (or stages for a one-statement send) carries the workflow,
 * the step and a wake of the workflow, and a step that declared `sends` may enqueue only those kinds (any other is
 * INVALID_CONFIG).
 */
function stepCommands(
  commands: CommandQueue & Partial<CommandStaging>,
  request: RunRequest,
  sends: readonly string[] | undefined,
  signal: AbortSignal,
  gate: RunGate | undefined,
  preloads: StepPreloads | undefined,
): StepCommandQueue {
  // Keys this run sent under: what the claim read of them is out of date.
  const sentKeys = new Set<string>();
  const own = (command: NewCommand): NewCommand => {
    // The engine stopped waiting for this run (its deadline passed, or the worker is stopping): whatever it still
    // does, it sends nothing, since a later attempt may already send under its own key.
    if (signal.aborted) {
      throw new ComputeError('TIMEOUT', `step ${request.action} can no longer send: its run was abandoned`, {
        details: { path: ['kind'] },
      });
    }
    if (sends && !sends.includes(command.kind)) {
      throw new ComputeError(
        'INVALID_CONFIG',
        `step ${request.action} enqueued ${command.kind}, which it does not declare in sends (${sends.join(', ')})`,
        { details: { path: ['kind'], kind: command.kind, sends: [...sends] } },
      );
    }
    sentKeys.add(command.key);
    return {
      workflowId: request.workflowId,
      stepId: request.stepId,
      wake: { kind: WORKFLOW_WORK_KIND, key: request.key },
      ...command,
    };
  };
  const known = preloads?.commands;
  const preloaded = known
    ? (nodeId: string, key: string) =>
        sentKeys.has(key) ? undefined : (known.find((c) => c.nodeId === nodeId && c.key === key) ?? null)
    : undefined;
  const stage = commands.stage?.bind(commands);
  return {
    get: (sql, id) => commands.get(sql, id),
    findByKey: (sql, nodeId, key) => commands.findByKey(sql, nodeId, key),
    cancel: (tx, id, reason) => commands.cancel(tx, id, reason),
    enqueue: async (tx, command) => commands.enqueue(tx, own(command)),
    // Staging checks the same and adds the same, so a send that commits by one statement is the enqueue it replaces.
    ...(stage ? { stage: async (command: NewCommand) => stage(own(command)) } : {}),
    ...(gate
      ? {
          hold: async (sends: readonly [StepSend, ...StepSend[]]) => {
            const [first, ...rest] = sends.map((send) => ({ command: own(send.command), with_: send.with_ }));
            return gate.hold([first as StepSend, ...rest]);
          },
        }
      : {}),
    ...(preloaded ? { preloaded } : {}),
  };
}

/**
 * The command queue a step's context carries: with `hold` when the engine can write the step's last send with the
 * end of its pass (see `RunGate`); `awaitCommand` uses it.
 */
export type StepCommandQueue = CommandQueue &
  Partial<CommandStaging> & {
    /**
     * Holds the sends (one command, or a sequence, each with what is written with it) to be written by the run's next
     * statement or its end; false when they must be sent now.
     */
    hold?: (sends: readonly [StepSend, ...StepSend[]]) => Promise<boolean>;
    /**
     * The command under the full `key` on `nodeId` as the claim read it (null: it read none), when the run's
     * preloads hold this attempt's commands and the run has not sent under that key since; else undefined.
     */
    preloaded?: (nodeId: string, key: string) => Command | null | undefined;
  };

/**
 * The PKI port a step sees: a `provisioned` join token it mints for its workflow's tenant without naming a node
 * remembers the workflow's node, so the installed OS that joins with it re-keys that node (`provisionedTargetResolver`
 * prefers the token's node) even when the step returns no `joinTokenId` (walkthrough 1's `renderAutoinstallIso`
 * returns only `{ url }`).
 */
function stepPki(pki: PkiPort, request: RunRequest): PkiPort {
  const node = request.node;
  if (!node) return pki;
  const remembered = <T extends IssueJoinTokenInput>(input: T): T =>
    input?.role === 'provisioned' && input.nodeId === undefined && input.tenantId === request.tenantId
      ? { ...input, nodeId: node.id }
      : input;
  const sealed = pki.issueJoinTokenSecret?.bind(pki);
  const staged = pki.stageJoinTokenSecret?.bind(pki);
  const stagedToken = pki.stageJoinToken?.bind(pki);
  return {
    ...pki,
    issueJoinToken: (tx, input) => pki.issueJoinToken(tx, remembered(input)),
    ...(sealed ? { issueJoinTokenSecret: (tx, input) => sealed(tx, remembered(input)) } : {}),
    ...(staged ? { stageJoinTokenSecret: (input) => staged(remembered(input)) } : {}),
    ...(stagedToken ? { stageJoinToken: (input) => stagedToken(remembered(input)) } : {}),
  };
}

/**
 * Builds the context a control-plane step's `run` receives: the module context plus the workflow's coordinates.
 *
 * @example
 * ```ts
 * const stepCtx = buildStepContext(ctx, request, definition.sends, controller.signal);
 * ```
 */
export function buildStepContext(
  ctx: ModuleContext,
  request: RunRequest,
  sends: readonly string[] | undefined,
  signal: AbortSignal,
  gate?: RunGate,
  preloads?: StepPreloads,
  withResult?: StagedWrite[],
): StepContext {
  // The reconciler's own preload (the workflow as the claim read it) is not the step's.
  const { preloaded: _workflow, ...moduleCtx } = ctx;
  return {
    ...moduleCtx,
    // Every statement of the run writes its held send first, so the run's writes keep their order.
    ...(gate ? { sql: gate.guard(ctx.sql) } : {}),
    commands: stepCommands(ctx.commands, request, sends, signal, gate, preloads),
    ...(ctx.pki ? { pki: stepPki(ctx.pki, request) } : {}),
    workflowId: request.workflowId,
    workflow: request.workflow,
    stepId: request.stepId,
    attempt: request.attempt,
    idempotencyKey: `wf:${request.workflowId}:${request.stepId}`,
    tenantId: request.tenantId,
    deadline: request.deadline,
    signal,
    emit: () => undefined,
    ...(request.batchId ? { batchId: request.batchId } : {}),
    ...(request.node ? { node: request.node } : {}),
    ...(sends ? { sends } : {}),
    ...(preloads ? { preloads } : {}),
    ...(withResult ? { writeWithResult: (write: StagedWrite) => void withResult.push(write) } : {}),
  };
}
