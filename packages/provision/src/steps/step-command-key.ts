import type { StepContext } from '../define/types';

/**
 * The command key of one attempt of a step: `wf:<workflowId>:<stepId>#<attempt>[:<key>]`. Key per attempt, not per
 * step, when a retry must start over.
 *
 * @example
 * ```ts
 * stepCommandKey(ctx, 'power-cycle'); // 'wf:wf_01k…:main.3#0:power-cycle'
 * ```
 */
export function stepCommandKey(ctx: Pick<StepContext, 'workflowId' | 'stepId' | 'attempt'>, key?: string): string {
  const base = `wf:${ctx.workflowId}:${ctx.stepId}#${ctx.attempt}`;
  return key === undefined ? base : `${base}:${key}`;
}

/**
 * The key of an agent step's one command: `wf:<workflowId>:<stepId>` on the first attempt, `#<attempt>` on retries.
 *
 * @example
 * ```ts
 * agentStepCommandKey('wf_1', 'main.2', 1); // 'wf:wf_1:main.2#1'
 * ```
 */
export function agentStepCommandKey(workflowId: string, stepId: string, attempt: number): string {
  return attempt === 0 ? `wf:${workflowId}:${stepId}` : `wf:${workflowId}:${stepId}#${attempt}`;
}
