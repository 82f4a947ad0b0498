import type { Finding, FindingsProvider, ModuleContext } from '@better-compute/core';
import { nodeColumnSql } from '@better-compute/core/nodes';
import { ACTIVE_WORKFLOW_STATES } from '@better-compute/provision';
import { PHASE_PROFILES } from '../lifecycle/states';

/**
 * The thresholds of metal's findings: a step this far past its deadline means no worker runs its workflow (as
 * provision's `workflows-stuck`); each finding lists this many machines.
 *
 * @example
 * ```ts
 * METAL_DOCTOR_LIMITS.stalledAfterMs; // 300_000
 * ```
 */
export const METAL_DOCTOR_LIMITS = Object.freeze({ stalledAfterMs: 5 * 60_000, listed: 20 });

const PHASES = Object.keys(PHASE_PROFILES);
const MAX_MESSAGE = 300;

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

type Row = Record<string, unknown>;

async function failedMachines(ctx: ModuleContext): Promise<Finding | undefined> {
  const { rows } = await ctx.sql.query<Row>(
    `SELECT m.node_id, m.tenant_id, m.site_id, m.phase, m.last_error, m.updated_at, count(*) OVER () AS total
     FROM metal_machines m JOIN nodes n ON ${nodeColumnSql('id', 'n')} = m.node_id
     WHERE ${nodeColumnSql('provisionState', 'n')} = 'failed'
     ORDER BY m.updated_at DESC, m.node_id LIMIT $1`,
    [METAL_DOCTOR_LIMITS.listed],
  );
  if (rows.length === 0) return undefined;
  const count = Number(rows[0]?.total ?? rows.length);
  return {
    id: 'metal-failed',
    severity: 'warning',
    message: `${plural(count, 'machine is', 'machines are')} failed (metal.recover runs the failed phase again)`,
    details: {
      count,
      machines: rows.map((r) => {
        const error = r.last_error as { code?: unknown; message?: unknown; stepId?: unknown } | null;
        return {
          nodeId: r.node_id,
          tenantId: r.tenant_id,
          siteId: r.site_id,
          failedFrom: r.phase ?? null,
          since: new Date(r.updated_at as string | Date).toISOString(),
          error: error
            ? {
                code: typeof error.code === 'string' ? error.code : 'INTERNAL',
                message: typeof error.message === 'string' ? error.message.slice(0, MAX_MESSAGE) : '',
                ...(typeof error.stepId === 'string' ? { stepId: error.stepId } : {}),
              }
            : null,
        };
      }),
      ...(count > rows.length ? { truncated: true } : {}),
    },
  };
}

async function stalledMachines(ctx: ModuleContext, now: Date): Promise<Finding | undefined> {
  const before = new Date(now.getTime() - METAL_DOCTOR_LIMITS.stalledAfterMs);
  // A machine in a phase (not held) whose recorded workflow is not active, or whose step in flight is overdue.
  const { rows } = await ctx.sql.query<Row>(
    `SELECT stalled.*, count(*) OVER () AS total FROM (
       SELECT m.node_id, m.tenant_id, m.site_id, ${nodeColumnSql('provisionState', 'n')} AS state, m.workflow_id,
         w.state AS workflow_state, s.step_id, s.action, s.deadline,
         CASE WHEN w.id IS NULL OR NOT (w.state = ANY($2::text[])) THEN 'no-active-workflow' ELSE 'step-overdue' END
           AS reason
       FROM metal_machines m
       JOIN nodes n ON ${nodeColumnSql('id', 'n')} = m.node_id
       LEFT JOIN workflows w ON w.id = m.workflow_id
       LEFT JOIN LATERAL (
         SELECT step_id, action, deadline FROM workflow_steps
         WHERE workflow_id = w.id AND state IN ('running', 'waiting') AND deadline < $3
         ORDER BY deadline LIMIT 1
       ) s ON TRUE
       WHERE ${nodeColumnSql('provisionState', 'n')} = ANY($1::text[]) AND NOT m.held
         AND (w.id IS NULL OR NOT (w.state = ANY($2::text[])) OR s.step_id IS NOT NULL)
     ) stalled
     ORDER BY stalled.node_id LIMIT $4`,
    [PHASES, [...ACTIVE_WORKFLOW_STATES], before, METAL_DOCTOR_LIMITS.listed],
  );
  if (rows.length === 0) return undefined;
  const count = Number(rows[0]?.total ?? rows.length);
  return {
    id: 'metal-stalled',
    severity: 'warning',
    message:
      `${plural(count, 'machine is', 'machines are')} in a phase without an active workflow, or with a step more ` +
      'than 5 minutes past its deadline (are workers running? metal.abort and metal.recover start over)',
    details: {
      count,
      machines: rows.map((r) => ({
        nodeId: r.node_id,
        tenantId: r.tenant_id,
        siteId: r.site_id,
        state: r.state,
        reason: r.reason,
        workflowId: r.workflow_id ?? null,
        workflowState: r.workflow_state ?? null,
        ...(r.step_id
          ? {
              stepId: r.step_id,
              action: r.action,
              deadline: new Date(r.deadline as string | Date).toISOString(),
              overdueMs: now.getTime() - new Date(r.deadline as string | Date).getTime(),
            }
          : {}),
      })),
      ...(count > rows.length ? { truncated: true } : {}),
    },
  };
}

/**
 * Metal's doctor checks, in the findings contract provision's doctor uses, timed by `ctx.clock`: `metal-failed`
 * (warning) for machines in `failed`, and `metal-stalled` (warning) for machines in a workflow-driven state that is
 * not held whose recorded workflow is not active, or whose step in flight is more than 5 minutes past its deadline.
 * Each carries `count` and at most 20 machines in `details.machines` (`truncated` when there are more).
 *
 * @example
 * ```ts
 * const findings = await metalFindings(compute.context);
 * // [{ id: 'metal-failed', severity: 'warning', message: '1 machine is failed …', details: { count: 1, machines: [...] } }]
 * ```
 */
export const metalFindings: FindingsProvider = async (ctx) => {
  const now = ctx.clock.now();
  const findings = [await failedMachines(ctx), await stalledMachines(ctx, now)];
  return findings.filter((finding): finding is Finding => finding !== undefined);
};
