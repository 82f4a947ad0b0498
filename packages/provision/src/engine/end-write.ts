import type { StagedEndWrite, WorkflowEnd } from '../define/workflow-end-write';
import type { Plan } from './plan';
import type { EngineEnv } from './transitions';

const ENDED = new Set(['succeeded', 'failed', 'cancelled']);

/**
 * The owner's end write for a plan that ends its workflow (see `WorkflowEndWrite`), staged from the claim's reads:
 * undefined when the plan ends none, its owner registered none, the plan writes a run's writes with its result, or
 * the write declines. A write that throws is logged
 * and left out (the owner is queued as usual), so a faulty one cannot keep the workflow from ending.
 *
 * @example
 * ```ts
 * const end = await stageEndWrite(env, planned.plan, reads, now);
 * ```
 */
export async function stageEndWrite(
  env: EngineEnv,
  plan: Plan,
  reads: WorkflowEnd['reads'] | undefined,
  now: Date,
): Promise<StagedEndWrite | undefined> {
  const { owner, workflow } = plan;
  const write = owner ? env.endWrites?.get(owner.kind) : undefined;
  if (!owner || !write || !ENDED.has(workflow.state)) return undefined;
  // A run's writes with its result and the owner's write may update the same row (the node's labels, its state), and
  // PostgreSQL applies only the first update of a row in a statement: the owner is queued instead.
  if (plan.with?.length) return undefined;
  const { error: failure } = workflow;
  const error = failure ? { code: failure.code, message: failure.message, stepId: failure.stepId } : null;
  try {
    return await write.stage(
      {
        workflowId: workflow.id,
        key: owner.key,
        tenantId: workflow.tenantId,
        nodeId: workflow.nodeId,
        outcome: workflow.state as WorkflowEnd['outcome'],
        error,
        cancelReason: workflow.cancelReason,
        reads: reads ?? {},
        now,
      },
      env.ctx,
    );
  } catch (cause) {
    env.ctx.log.warn('a workflow end write failed to stage: the owner is queued instead', {
      owner: owner.kind,
      workflowId: workflow.id,
      error: cause instanceof Error ? cause.message : String(cause),
    });
    return undefined;
  }
}

/**
 * Runs an end write's `afterCommit` once its statement committed; a failure is logged, never thrown (the workflow
 * has ended and the owner's writes are in).
 *
 * @example
 * ```ts
 * await afterEndWrite(env, end, workflowId);
 * ```
 */
export async function afterEndWrite(env: EngineEnv, end: StagedEndWrite, workflowId: string): Promise<void> {
  if (!end.afterCommit) return;
  try {
    await end.afterCommit();
  } catch (cause) {
    env.ctx.log.warn('a workflow end write failed after its commit', {
      workflowId,
      error: cause instanceof Error ? cause.message : String(cause),
    });
  }
}
