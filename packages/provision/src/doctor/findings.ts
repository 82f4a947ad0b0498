import type { Finding, FindingsProvider, ModuleContext } from '@better-compute/core';
import { ACTIVE_STATES_SQL } from '../engine/constants';

/**
 * The doctor's thresholds: a step this far past its deadline means no worker runs its workflow (the engine fails an
 * overdue step as soon as it looks); failed workflows are reported for this long; each finding lists this many.
 *
 * @example
 * ```ts
 * DOCTOR_LIMITS.stuckAfterMs; // 300_000
 * ```
 */
export const DOCTOR_LIMITS = Object.freeze({
  stuckAfterMs: 5 * 60_000,
  failedWithinMs: 24 * 60 * 60_000,
  listed: 20,
});

const MAX_MESSAGE = 300;

type StuckRow = {
  workflow_id: string;
  tenant_id: string;
  node_id: string | null;
  profile_id: string;
  profile_version: number;
  state: string;
  step_id: string;
  action: string;
  deadline: string | Date;
  total: string | number;
};

type FailedRow = {
  id: string;
  tenant_id: string;
  node_id: string | null;
  profile_id: string;
  profile_version: number;
  finished_at: string | Date;
  error: { code?: unknown; message?: unknown; stepId?: unknown } | null;
  total: string | number;
};

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

async function stuckWorkflows(ctx: ModuleContext, now: Date): Promise<Finding | undefined> {
  const before = new Date(now.getTime() - DOCTOR_LIMITS.stuckAfterMs);
  // One row per workflow (its most overdue step in flight), the most overdue first.
  const { rows } = await ctx.sql.query<StuckRow>(
    `SELECT stuck.*, count(*) OVER () AS total FROM (
       SELECT DISTINCT ON (w.id) w.id AS workflow_id, w.tenant_id, w.node_id, w.profile_id, w.profile_version, w.state,
         s.step_id, s.action, s.deadline
       FROM workflows w JOIN workflow_steps s ON s.workflow_id = w.id
       WHERE w.state IN ${ACTIVE_STATES_SQL} AND s.state IN ('running', 'waiting') AND s.deadline < $1
       ORDER BY w.id, s.deadline
     ) stuck
     ORDER BY stuck.deadline, stuck.workflow_id LIMIT $2`,
    [before, DOCTOR_LIMITS.listed],
  );
  if (rows.length === 0) return undefined;
  const count = Number(rows[0]?.total ?? rows.length);
  return {
    id: 'workflows-stuck',
    severity: 'warning',
    message:
      `${plural(count, 'active workflow has a step', 'active workflows have a step')} more than 5 minutes past its ` +
      'deadline: no worker seems to run the workflow reconciler for them (are workers running, and do they own ' +
      'every shard?)',
    details: {
      count,
      workflows: rows.map((r) => ({
        workflowId: r.workflow_id,
        tenantId: r.tenant_id,
        nodeId: r.node_id,
        profileId: r.profile_id,
        profileVersion: Number(r.profile_version),
        state: r.state,
        stepId: r.step_id,
        action: r.action,
        deadline: new Date(r.deadline).toISOString(),
        overdueMs: now.getTime() - new Date(r.deadline).getTime(),
      })),
      ...(count > rows.length ? { truncated: true } : {}),
    },
  };
}

async function failedWorkflows(ctx: ModuleContext, now: Date): Promise<Finding | undefined> {
  const since = new Date(now.getTime() - DOCTOR_LIMITS.failedWithinMs);
  // updated_at is at least finished_at, so the state index narrows the search.
  const { rows } = await ctx.sql.query<FailedRow>(
    `SELECT id, tenant_id, node_id, profile_id, profile_version, finished_at, error, count(*) OVER () AS total
     FROM workflows
     WHERE state = 'failed' AND updated_at >= $1 AND finished_at >= $1
     ORDER BY finished_at DESC, id LIMIT $2`,
    [since, DOCTOR_LIMITS.listed],
  );
  if (rows.length === 0) return undefined;
  const count = Number(rows[0]?.total ?? rows.length);
  return {
    id: 'workflows-failed',
    severity: 'info',
    message: `${plural(count, 'workflow', 'workflows')} failed in the last day (workflows.retry runs one again)`,
    details: {
      count,
      workflows: rows.map((r) => ({
        workflowId: r.id,
        tenantId: r.tenant_id,
        nodeId: r.node_id,
        profileId: r.profile_id,
        profileVersion: Number(r.profile_version),
        finishedAt: new Date(r.finished_at).toISOString(),
        error: {
          code: typeof r.error?.code === 'string' ? r.error.code : 'INTERNAL',
          message: typeof r.error?.message === 'string' ? r.error.message.slice(0, MAX_MESSAGE) : '',
          ...(typeof r.error?.stepId === 'string' ? { stepId: r.error.stepId } : {}),
        },
      })),
      ...(count > rows.length ? { truncated: true } : {}),
    },
  };
}

/**
 * The provision module's doctor checks, timed by `ctx.clock`: `workflows-stuck` (warning) for active workflows with a
 * step in flight more than 5 minutes past its deadline, and `workflows-failed` (info) for workflows that failed in the
 * last day. Each carries `count` and at most 20 workflows in `details.workflows` (`truncated` when there are more).
 * A healthy system has none.
 *
 * @example
 * ```ts
 * const findings = await provisionFindings(compute.context);
 * // [{ id: 'workflows-failed', severity: 'info', message: '1 workflow failed in the last day …', details: { count: 1, workflows: [...] } }]
 * ```
 */
export const provisionFindings: FindingsProvider = async (ctx) => {
  const now = ctx.clock.now();
  const findings = [await stuckWorkflows(ctx, now), await failedWorkflows(ctx, now)];
  return findings.filter((finding): finding is Finding => finding !== undefined);
};
