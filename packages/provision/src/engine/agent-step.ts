import {
  ComputeError,
  currentAgentSession,
  isComputeError,
  isTerminalCommandState,
  type Json,
  type NewCommand,
  type SqlExecutor,
  validateInput,
} from '@better-compute/core';
import { siteAgentFor } from '../steps/site-agent-for';
import { agentStepCommandKey } from '../steps/step-command-key';
import { ENGINE_DEFAULTS, WORKFLOW_WORK_KIND } from './constants';
import { type Decision, waitUntil } from './decision';
import { requireTransaction, StagedWrites } from './staged-writes';
import { cancelStepCommand, type EngineEnv, failStep, succeedStep } from './transitions';
import {
  type InFlightCommand,
  type StepError,
  type StepRecord,
  updateStep,
  type WorkflowRecord,
} from './workflow-rows';

const ENDED_CODE = {
  failed: 'COMMAND_FAILED',
  rejected: 'COMMAND_REJECTED',
  expired: 'COMMAND_EXPIRED',
  cancelled: 'COMMAND_CANCELLED',
} as const;

function stepErrorOf(error: ComputeError): StepError {
  const reason = typeof error.details.reason === 'string' ? { reason: error.details.reason } : {};
  return { code: error.code, message: error.message, ...reason };
}

/** The command payload: a registered agent step's validated input, or a driver operation's invocation. */
async function payloadOf(env: EngineEnv, workflow: WorkflowRecord, step: StepRecord): Promise<Json> {
  if (step.resolution === 'driver') {
    const concern = step.action.split('.')[0] as string;
    return {
      operation: step.action,
      driver: workflow.document.drivers?.[concern] ?? null,
      input: step.spec.with ?? {},
    };
  }
  const definition = env.steps.get(step.action);
  if (!definition || definition.runsOn === 'control-plane') {
    throw new ComputeError('INVALID_CONFIG', `step ${step.action} is not registered in this worker as an agent step`);
  }
  return (await validateInput(definition.input, step.spec.with ?? {}, ['with'])) as Json;
}

async function failAndContinue(
  tx: SqlExecutor,
  env: EngineEnv,
  workflow: WorkflowRecord,
  steps: readonly StepRecord[],
  step: StepRecord,
  error: StepError,
  now: Date,
): Promise<Decision> {
  await failStep(tx, env, workflow, steps, step, error, now);
  return { kind: 'continue' };
}

/** Decodes an agent's result bytes: JSON when they are UTF-8 JSON, else `{ base64 }`; null when there are none. */
export function decodeResult(bytes: Uint8Array | undefined): Json {
  if (!bytes || bytes.length === 0) return null;
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)) as Json;
  } catch {
    return { base64: Buffer.from(bytes).toString('base64') };
  }
}

/**
 * Whether an agent step's command can be staged with the transition that sends it (one statement, no transaction):
 * planning without a transaction, a node or ramdisk step (a site step looks for a site agent first) that does not
 * await a rejoin (that reads the agent's session), and a command queue that stages. `commands.stage` may still
 * decline (with command policies installed); the step is then sent in a transaction.
 *
 * @example
 * ```ts
 * if (!canStageCommand(tx, env, workflow, step)) requireTransaction(tx);
 * ```
 */
export function canStageCommand(tx: SqlExecutor, env: EngineEnv, workflow: WorkflowRecord, step: StepRecord): boolean {
  return (
    tx instanceof StagedWrites &&
    tx.stageCommands &&
    (step.runsOn === 'node' || step.runsOn === 'ramdisk') &&
    !step.awaitRejoin &&
    workflow.node !== undefined &&
    typeof env.ctx.commands.stage === 'function'
  );
}

/**
 * Sends an agent step's one command (keyed `wf:<id>:<step>`, `#<attempt>` on retries, `not_after` its deadline, the
 * workflow's batch on destructive kinds only) and parks the step `waiting`. Site steps go to a connected site agent of
 * the node's site; with none before the deadline the step fails NO_SITE_AGENT. Planned without a transaction, a node
 * or ramdisk step's command is staged, so the statement that writes the transition inserts it (see
 * {@link canStageCommand}).
 *
 * @example
 * ```ts
 * return sendAgentCommand(tx, env, workflow, steps, step, now);
 * ```
 */
export async function sendAgentCommand(
  tx: SqlExecutor,
  env: EngineEnv,
  workflow: WorkflowRecord,
  steps: readonly StepRecord[],
  step: StepRecord,
  now: Date,
): Promise<Decision> {
  const staging = canStageCommand(tx, env, workflow, step);
  if (!staging) requireTransaction(tx);
  const fail = (error: StepError) => failAndContinue(tx, env, workflow, steps, step, error, now);
  const node = workflow.node;
  if (!node) return fail({ code: 'INVALID_CONFIG', message: `${step.runsOn} steps need a node workflow` });
  const deadline = step.deadline ?? now;
  let target = node.id;
  if (step.runsOn === 'site') {
    const agent = await siteAgentFor(tx, node.id, env.ctx.clock);
    if (!agent) {
      if (now.getTime() >= deadline.getTime()) {
        return fail({
          code: 'NO_SITE_AGENT',
          message: `no connected site agent served site ${node.siteId ?? '(none)'}`,
        });
      }
      return waitUntil(now, ENGINE_DEFAULTS.commandStepPollMs, deadline);
    }
    target = agent.nodeId;
  } else if (now.getTime() >= deadline.getTime()) {
    return fail({ code: 'TIMEOUT', message: 'no result before the step deadline' });
  }
  const kind = step.commandKind as string;
  let commandId: string;
  try {
    const payload = await payloadOf(env, workflow, step);
    const destructive = env.ctx.commandKinds.get(kind)?.definition.destructive === true;
    const input: NewCommand = {
      nodeId: target,
      kind,
      payload,
      key: agentStepCommandKey(workflow.id, step.stepId, step.attempt),
      notAfter: deadline,
      workflowId: workflow.id,
      stepId: step.stepId,
      wake: { kind: WORKFLOW_WORK_KIND, key: workflow.key },
      ...(target !== node.id || step.resolution === 'driver' ? { targetNodeId: node.id } : {}),
      ...(destructive && workflow.batchId ? { batchId: workflow.batchId } : {}),
    };
    const staged = staging ? await env.ctx.commands.stage?.(input) : undefined;
    if (staged) {
      (tx as StagedWrites).stageCommand(staged);
      commandId = staged.id;
    } else {
      requireTransaction(tx);
      commandId = (await env.ctx.commands.enqueue(tx, input)).id;
    }
  } catch (error) {
    if (isComputeError(error)) return fail(stepErrorOf(error));
    throw error;
  }
  let rejoin: StepRecord['rejoin'] = null;
  if (step.awaitRejoin) {
    const session = await currentAgentSession(tx, target, { now });
    rejoin = { nodeId: target, bootId: session?.bootId ?? null, role: session?.role ?? null };
  }
  await updateStep(tx, step, { state: 'waiting', commandId, rejoin }, now);
  return waitUntil(now, ENGINE_DEFAULTS.workflowPollMs, deadline);
}

/**
 * Whether the command read with the workflow decides the step on its own: it is the step's, and either settled (a
 * settled command never changes) or open with neither its `notAfter` nor the step's deadline reached (what
 * `commands.get` would expire, or the step's timeout would cancel, is left to a transaction).
 */
function usable(known: InFlightCommand | undefined, step: StepRecord, now: Date): known is InFlightCommand {
  if (!known || known.id !== step.commandId) return false;
  if (isTerminalCommandState(known.state)) return true;
  const deadline = step.deadline?.getTime() ?? now.getTime();
  return now.getTime() <= known.notAfter.getTime() && now.getTime() < deadline;
}

async function readStepCommand(tx: SqlExecutor, env: EngineEnv, step: StepRecord) {
  requireTransaction(tx);
  return step.commandId ? env.ctx.commands.get(tx, step.commandId) : undefined;
}

/**
 * Looks at a waiting agent step: its command's outcome (or, for `await: 'rejoin'`, the agent back with a new boot id
 * or role), its deadline (TIMEOUT, cancelling the command; REJOIN_TIMEOUT for a rejoin), or waits again. `known` is the
 * command as read with the workflow: when it decides the step, no transaction is needed.
 *
 * @example
 * ```ts
 * return checkAgentStep(tx, env, workflow, steps, step, now);
 * ```
 */
export async function checkAgentStep(
  tx: SqlExecutor,
  env: EngineEnv,
  workflow: WorkflowRecord,
  steps: readonly StepRecord[],
  step: StepRecord,
  now: Date,
  known?: InFlightCommand,
): Promise<Decision> {
  const fail = (error: StepError) => failAndContinue(tx, env, workflow, steps, step, error, now);
  const deadline = step.deadline ?? now;
  const overdue = now.getTime() >= deadline.getTime();
  if (step.awaitRejoin && step.rejoin) {
    requireTransaction(tx);
    const session = await currentAgentSession(tx, step.rejoin.nodeId, { now });
    if (session && (session.bootId !== step.rejoin.bootId || session.role !== step.rejoin.role)) {
      await succeedStep(tx, env, workflow, step, { bootId: session.bootId, role: session.role }, now);
      return { kind: 'continue' };
    }
    if (!overdue) return waitUntil(now, ENGINE_DEFAULTS.workflowPollMs, deadline);
    await cancelStepCommand(tx, env, step, 'the agent did not rejoin before the step deadline');
    return fail({ code: 'REJOIN_TIMEOUT', message: 'the agent did not come back before the step deadline' });
  }
  const command = usable(known, step, now) ? known : await readStepCommand(tx, env, step);
  if (!command) return fail({ code: 'INTERNAL', message: 'the step command is missing' });
  if (command.state === 'succeeded') {
    await succeedStep(tx, env, workflow, step, decodeResult(command.result), now);
    return { kind: 'continue' };
  }
  const ended = ENDED_CODE[command.state as keyof typeof ENDED_CODE];
  if (ended) {
    const reason = command.reason ?? command.state;
    return fail({ code: ended, message: `command ${command.kind} ${command.state}: ${reason}`, reason });
  }
  if (!overdue) return waitUntil(now, ENGINE_DEFAULTS.workflowPollMs, deadline);
  await cancelStepCommand(tx, env, step, 'the step timed out');
  return fail({ code: 'TIMEOUT', message: 'no result before the step deadline' });
}
