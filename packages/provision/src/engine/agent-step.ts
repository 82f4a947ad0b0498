import { ComputeError, isComputeError, type Json, type NewCommand, validateInput } from '@better-compute/core';
import { isTerminalCommandState } from '@better-compute/core/kernel';
import { agentStepCommandKey } from '../steps/step-command-key';
import { ENGINE_DEFAULTS, WORKFLOW_WORK_KIND } from './constants';
import { type Decision, waitUntil } from './decision';
import type { Known, Need, PlanDraft } from './plan';
import { cancelStepCommand, type EngineEnv, failStep, succeedStep } from './transitions';
import type { InFlightCommand, StepError, StepRecord, WorkflowRecord } from './workflow-rows';

/** What a transition comes to: what the reconciler does next, or what it must read first. */
export type Step = Decision | { kind: 'needs'; need: Need };

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
async function payloadOf(env: EngineEnv, workflow: WorkflowRecord, step: StepRecord, known: Known): Promise<Json> {
  if (step.resolution === 'driver') {
    const concern = step.action.split('.')[0] as string;
    return {
      ...known.driverFields,
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

function failAndContinue(draft: PlanDraft, step: StepRecord, error: StepError, now: Date): Decision {
  failStep(draft, step, error, now);
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
 * Sends an agent step's one command (keyed `wf:<id>:<step>`, `#<attempt>` on retries, `not_after` its deadline, the
 * workflow's batch on destructive kinds only) and parks the step `waiting`; the plan's writer sends it (in the same
 * statement when it can). Site steps go to a connected site agent of the node's site (`known.siteAgent`, a need until
 * read); with none before the deadline the step fails NO_SITE_AGENT. An `await: 'rejoin'` step records the target's
 * agent session (`known.session`). A command the queue refused (`known.sendRefused`) fails the step.
 *
 * @example
 * ```ts
 * return sendAgentCommand(draft, env, step, known, now);
 * ```
 */
export async function sendAgentCommand(
  draft: PlanDraft,
  env: EngineEnv,
  step: StepRecord,
  known: Known,
  now: Date,
): Promise<Step> {
  const fail = (error: StepError) => failAndContinue(draft, step, error, now);
  const { workflow } = draft;
  const node = workflow.node;
  if (!node) return fail({ code: 'INVALID_CONFIG', message: `${step.runsOn} steps need a node workflow` });
  if (known.sendRefused) return fail(stepErrorOf(known.sendRefused));
  const deadline = step.deadline ?? now;
  let target = node.id;
  if (step.runsOn === 'site') {
    if (known.siteAgent === undefined) {
      return { kind: 'needs', need: { kind: 'site-agent', nodeId: node.id, siteId: node.siteId ?? null } };
    }
    const agent = known.siteAgent;
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
  let rejoin: StepRecord['rejoin'] = null;
  if (step.awaitRejoin) {
    if (known.session === undefined) return { kind: 'needs', need: { kind: 'agent-session', nodeId: target } };
    rejoin = { nodeId: target, bootId: known.session?.bootId ?? null, role: known.session?.role ?? null };
  }
  // A driver operation carries what the modules' driver targets add for the machine (metal: its BMC); read here only,
  // so no other step pays for it.
  if (step.resolution === 'driver' && (env.driverTargets?.length ?? 0) > 0 && known.driverFields === undefined) {
    return { kind: 'needs', need: { kind: 'driver-target', nodeId: node.id } };
  }
  const kind = step.commandKind as string;
  let input: NewCommand;
  try {
    const payload = await payloadOf(env, workflow, step, known);
    const destructive = env.ctx.commandKinds.get(kind)?.definition.destructive === true;
    input = {
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
  } catch (error) {
    if (isComputeError(error)) return fail(stepErrorOf(error));
    throw error;
  }
  draft.send(step.stepId, input);
  draft.updateStep(step, { state: 'waiting', rejoin });
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

/**
 * Looks at a waiting agent step: its command's outcome (or, for `await: 'rejoin'`, the agent back with a new boot id
 * or role), its deadline (TIMEOUT, cancelling the command; REJOIN_TIMEOUT for a rejoin), or waits again. The command
 * as read with the workflow decides when it can (see `usable`); else it is a need (`commands.get`, which expires a
 * command past its `notAfter`), as is the agent's session for a rejoin.
 *
 * @example
 * ```ts
 * return checkAgentStep(draft, step, known, now);
 * ```
 */
export function checkAgentStep(draft: PlanDraft, step: StepRecord, known: Known, now: Date): Step {
  const fail = (error: StepError) => failAndContinue(draft, step, error, now);
  const deadline = step.deadline ?? now;
  const overdue = now.getTime() >= deadline.getTime();
  if (step.awaitRejoin && step.rejoin) {
    if (known.session === undefined) {
      return { kind: 'needs', need: { kind: 'agent-session', nodeId: step.rejoin.nodeId } };
    }
    const session = known.session;
    if (session && (session.bootId !== step.rejoin.bootId || session.role !== step.rejoin.role)) {
      succeedStep(draft, step, { bootId: session.bootId, role: session.role }, now);
      return { kind: 'continue' };
    }
    if (!overdue) return waitUntil(now, ENGINE_DEFAULTS.workflowPollMs, deadline);
    cancelStepCommand(draft, step, 'the agent did not rejoin before the step deadline');
    return fail({ code: 'REJOIN_TIMEOUT', message: 'the agent did not come back before the step deadline' });
  }
  let command: InFlightCommand | Known['command'] = usable(draft.inFlightCommand, step, now)
    ? draft.inFlightCommand
    : known.command;
  if (command === undefined && step.commandId) {
    return { kind: 'needs', need: { kind: 'command', commandId: step.commandId } };
  }
  command ??= null;
  if (!command) return fail({ code: 'INTERNAL', message: 'the step command is missing' });
  if (command.state === 'succeeded') {
    succeedStep(draft, step, decodeResult(command.result), now);
    return { kind: 'continue' };
  }
  const ended = ENDED_CODE[command.state as keyof typeof ENDED_CODE];
  if (ended) {
    const reason = command.reason ?? command.state;
    return fail({ code: ended, message: `command ${command.kind} ${command.state}: ${reason}`, reason });
  }
  if (!overdue) return waitUntil(now, ENGINE_DEFAULTS.workflowPollMs, deadline, { id: command.id, deadline });
  cancelStepCommand(draft, step, 'the step timed out');
  return fail({ code: 'TIMEOUT', message: 'no result before the step deadline' });
}
