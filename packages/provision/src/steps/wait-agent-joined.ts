import { ComputeError, field, manifest } from '@better-compute/core';
import { AGENT_ROLES, currentAgentSession } from '@better-compute/core/kernel';
import { defineStep } from '../define/define-step';
import type { StepContext } from '../define/types';
import { stepNotReady } from '../engine/step-not-ready';

/**
 * The node of a node workflow, or INVALID_CONFIG naming the step that needs one.
 *
 * @example
 * ```ts
 * const node = requireStepNode(ctx, 'wait.agentJoined');
 * ```
 */
export function requireStepNode(ctx: StepContext, stepId: string): NonNullable<StepContext['node']> {
  if (!ctx.node) {
    throw new ComputeError('INVALID_CONFIG', `${stepId} waits on a node; this workflow has none`, {
      details: { path: ['nodeId'] },
    });
  }
  return ctx.node;
}

/**
 * `wait.agentJoined`: waits until the workflow's node has a connected session in `role` (default `node`) that
 * connected after the workflow started, so the session the node had before (the ramdisk, the old OS) never counts.
 * Succeeds with `{ bootId, role, connectedAt }`; until then throws `stepNotReady(5_000)`, and at its deadline (30
 * minutes unless the profile step sets `timeout`) fails TIMEOUT.
 *
 * @example
 * ```ts
 * const steps = [{ use: 'power.setPower', on: 'site', with: { action: 'cycle' } }, { use: 'wait.agentJoined', with: { role: 'provisioned' }, timeout: '45m' }];
 * ```
 */
export const waitAgentJoined = defineStep({
  id: 'wait.agentJoined',
  runsOn: 'control-plane',
  timeout: '30m',
  retrySafe: true,
  input: manifest({
    role: field.enum(AGENT_ROLES).default('node').describe('The role the node must come back in.'),
  }),
  description: "Waits until the workflow's node connects in a role, after the workflow started.",
  async run(input, ctx) {
    const node = requireStepNode(ctx, 'wait.agentJoined');
    const since = ctx.workflow.startedAt;
    const session = await currentAgentSession(ctx.sql, node.id, { now: ctx.clock.now() });
    if (!session || session.role !== input.role || session.connectedAt.getTime() <= since.getTime()) {
      throw stepNotReady(5_000);
    }
    return { bootId: session.bootId, role: session.role, connectedAt: new Date(session.connectedAt).toISOString() };
  },
});
