import {
  ComputeError,
  defineApiGroup,
  defineApiMethod,
  type ModuleContext,
  resolveNodeResource,
  type SqlExecutor,
} from '@better-compute/core';
import * as v from 'valibot';
import type { WorkflowState } from '../engine/constants';
import { abortWorkflow, getWorkflow, pauseWorkflow, resumeWorkflow, retryWorkflow } from '../engine/verbs';
import type { WorkflowError } from '../engine/workflow-rows';
import type { StepView, WorkflowView } from '../engine/workflow-view';
import { cursorSchema, decodeCursor, encodeCursor, limitSchema, type Page } from './pages';
import { iso, textSchema } from './schemas';

/** A view with its times as ISO 8601 strings, as JSON carries them. */
type WithIsoTimes<T> = {
  [K in keyof T]: T[K] extends Date ? string : T[K] extends Date | null ? string | null : T[K];
};

/** One step of a workflow as `workflows.get` returns it: a {@link StepView} with times as ISO 8601 strings. */
export type ApiWorkflowStep = WithIsoTimes<StepView>;

/** A workflow as `workflows.list` returns it: everything but the steps, times as ISO 8601 strings. */
export type ApiWorkflowSummary = WithIsoTimes<Omit<WorkflowView, 'steps'>>;

/** A workflow as `workflows.get` and the verbs return it, with every step in run order. */
export interface ApiWorkflow extends ApiWorkflowSummary {
  steps: ApiWorkflowStep[];
}

/**
 * The API form of an engine {@link WorkflowView}: the same fields, with times as ISO 8601 strings, so `compute.api`
 * and `POST /v1/workflows.get` return the same document.
 *
 * @example
 * ```ts
 * const wf = toApiWorkflow(await getWorkflow(sql, { workflowId }));
 * wf.steps[0]?.deadline; // '2026-03-01T00:10:00.000Z'
 * ```
 */
export function toApiWorkflow(view: WorkflowView): ApiWorkflow {
  return {
    id: view.id,
    tenantId: view.tenantId,
    nodeId: view.nodeId,
    instanceId: view.instanceId,
    profileId: view.profileId,
    profileVersion: view.profileVersion,
    state: view.state,
    stepId: view.stepId,
    error: view.error,
    owner: view.owner,
    cancelReason: view.cancelReason,
    commandKinds: view.commandKinds,
    batchId: view.batchId,
    createdAt: iso(view.createdAt) as string,
    updatedAt: iso(view.updatedAt) as string,
    startedAt: iso(view.startedAt),
    finishedAt: iso(view.finishedAt),
    steps: view.steps.map((s) => ({
      stepId: s.stepId,
      phase: s.phase,
      action: s.action,
      ...(s.name === undefined ? {} : { name: s.name }),
      runsOn: s.runsOn,
      state: s.state,
      attempt: s.attempt,
      commandId: s.commandId,
      deadline: iso(s.deadline),
      startedAt: iso(s.startedAt),
      finishedAt: iso(s.finishedAt),
      result: s.result,
      error: s.error,
    })),
  };
}

const WORKFLOWS_LISTING = 'workflows';

const nodeInput = { tenantId: textSchema('tenantId'), nodeId: textSchema('nodeId') };
const workflowInput = { ...nodeInput, workflowId: textSchema('workflowId') };

const onNode = (input: { tenantId: string; nodeId: string }, ctx: ModuleContext) =>
  resolveNodeResource(ctx.sql, input.tenantId, input.nodeId);

function workflowNotFound(workflowId: string): ComputeError {
  return new ComputeError('NOT_FOUND', `workflow ${workflowId} not found`, { details: { path: ['workflowId'] } });
}

/** NOT_FOUND unless the workflow is the node's (and so the tenant's). A workflow never changes node. */
async function assertOfNode(
  sql: SqlExecutor,
  input: { tenantId: string; nodeId: string; workflowId: string },
): Promise<void> {
  const { rowCount } = await sql.query('SELECT 1 FROM workflows WHERE id = $1 AND tenant_id = $2 AND node_id = $3', [
    input.workflowId,
    input.tenantId,
    input.nodeId,
  ]);
  if (rowCount === 0) throw workflowNotFound(input.workflowId);
}

type Row = Record<string, unknown>;

// Newest first; ties on created_at broken by id, compared bytewise so the order is the same on every server.
const LIST_WORKFLOWS = `
SELECT w.id, w.tenant_id, w.node_id, w.instance_id, w.profile_id, w.profile_version, w.state, w.error, w.owner,
  w.cancel_reason, w.command_kinds, w.batch_id, w.created_at, w.updated_at, w.started_at, w.finished_at,
  to_char(w.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_key,
  (SELECT s.step_id FROM workflow_steps s WHERE s.workflow_id = w.id AND s.state IN ('running', 'waiting')
     ORDER BY s.position LIMIT 1) AS in_flight
FROM workflows w
WHERE w.tenant_id = $1 AND w.node_id = $2
  AND ($3::timestamptz IS NULL OR w.created_at < $3::timestamptz
       OR (w.created_at = $3::timestamptz AND w.id COLLATE "C" < $4::text COLLATE "C"))
ORDER BY w.created_at DESC, w.id COLLATE "C" DESC
LIMIT $5`;

function toSummary(r: Row): ApiWorkflowSummary {
  return {
    id: r.id as string,
    tenantId: r.tenant_id as string,
    nodeId: (r.node_id as string | null) ?? null,
    instanceId: (r.instance_id as string | null) ?? null,
    profileId: r.profile_id as string,
    profileVersion: Number(r.profile_version),
    state: r.state as WorkflowState,
    stepId: (r.in_flight as string | null) ?? null,
    error: (r.error as WorkflowError | null) ?? null,
    owner: (r.owner as string | null) ?? null,
    cancelReason: (r.cancel_reason as string | null) ?? null,
    commandKinds: (r.command_kinds as string[] | null) ?? [],
    batchId: (r.batch_id as string | null) ?? null,
    createdAt: iso(r.created_at as Date) as string,
    updatedAt: iso(r.updated_at as Date) as string,
    startedAt: iso(r.started_at as Date | null),
    finishedAt: iso(r.finished_at as Date | null),
  };
}

/**
 * The `workflows` API group (workflows.md, "The workflows API"): `list`, `get`, `abort`, `retry`, `pause` and
 * `resume`, all decided on the node (`compute-node`): `get` and `list` as `compute:workflows:read`, the verbs as
 * `compute:workflows:manage`. A node of another tenant, and a workflow that is not the node's, are NOT_FOUND.
 *
 * @example
 * ```ts
 * const compute = await betterCompute({ modules: [{ id: 'ops', api: { workflows: workflowsApi() } }] });
 * const { items } = await compute.api.workflows.list(token, { tenantId: 'root', nodeId, limit: 20 });
 * ```
 */
export function workflowsApi() {
  const list = defineApiMethod({
    input: v.object({ ...nodeInput, limit: limitSchema, cursor: cursorSchema }),
    permission: 'compute:workflows:read',
    resource: onNode,
    description: 'A node’s workflows, newest first, without their steps; `nextCursor` fetches the next page.',
    handler: async (input, ctx): Promise<Page<ApiWorkflowSummary>> => {
      const after = input.cursor === undefined ? undefined : decodeCursor(input.cursor, WORKFLOWS_LISTING, ['t', 's']);
      const { rows } = await ctx.sql.query<Row>(LIST_WORKFLOWS, [
        input.tenantId,
        input.nodeId,
        after?.[0] ?? null,
        after?.[1] ?? null,
        input.limit + 1,
      ]);
      const page = rows.slice(0, input.limit);
      const last = page[page.length - 1];
      const nextCursor =
        rows.length > input.limit && last
          ? encodeCursor(WORKFLOWS_LISTING, [last.created_key as string, last.id as string])
          : null;
      return { items: page.map(toSummary), nextCursor };
    },
  });

  const get = defineApiMethod({
    input: v.object(workflowInput),
    permission: 'compute:workflows:read',
    resource: onNode,
    description: 'One workflow of a node: its state, the step in flight, its error, and every step.',
    handler: async (input, ctx): Promise<ApiWorkflow> => {
      const view = await getWorkflow(ctx.sql, { workflowId: input.workflowId, tenantId: input.tenantId });
      if (view.nodeId !== input.nodeId) throw workflowNotFound(input.workflowId);
      return toApiWorkflow(view);
    },
  });

  const abort = defineApiMethod({
    input: v.object({
      ...workflowInput,
      reason: v.optional(
        v.pipe(v.string('reason must be a string'), v.maxLength(1024, 'reason must be at most 1024 characters')),
      ),
    }),
    permission: 'compute:workflows:manage',
    resource: onNode,
    description:
      'Cancels pending steps and the in-flight command, runs the cleanup phase and ends the workflow cancelled. ' +
      'Aborting twice does nothing; a succeeded workflow is INVALID_STATE.',
    handler: async (input, ctx): Promise<ApiWorkflow> => {
      await assertOfNode(ctx.sql, input);
      const ref = { workflowId: input.workflowId, tenantId: input.tenantId };
      return toApiWorkflow(
        await abortWorkflow(ctx, input.reason === undefined ? ref : { ...ref, reason: input.reason }),
      );
    },
  });

  const retry = defineApiMethod({
    input: v.object({ ...workflowInput, fromStep: v.optional(textSchema('fromStep')) }),
    permission: 'compute:workflows:manage',
    resource: onNode,
    description:
      'Runs a failed workflow again from fromStep (default: the first main step that did not succeed). ' +
      'CONFLICT when the node has another active workflow.',
    handler: async (input, ctx): Promise<ApiWorkflow> => {
      await assertOfNode(ctx.sql, input);
      const ref = { workflowId: input.workflowId, tenantId: input.tenantId };
      return toApiWorkflow(
        await retryWorkflow(ctx, input.fromStep === undefined ? ref : { ...ref, fromStep: input.fromStep }),
      );
    },
  });

  const pause = defineApiMethod({
    input: v.object(workflowInput),
    permission: 'compute:workflows:manage',
    resource: onNode,
    description:
      'Pauses a running workflow: the step in flight finishes, no further step starts until resume. ' +
      'A workflow in its cleanup phase or in any state but running is INVALID_STATE.',
    handler: async (input, ctx): Promise<ApiWorkflow> => {
      await assertOfNode(ctx.sql, input);
      return toApiWorkflow(await pauseWorkflow(ctx, { workflowId: input.workflowId, tenantId: input.tenantId }));
    },
  });

  const resume = defineApiMethod({
    input: v.object(workflowInput),
    permission: 'compute:workflows:manage',
    resource: onNode,
    description: 'Resumes a paused workflow and wakes it; any other state is INVALID_STATE.',
    handler: async (input, ctx): Promise<ApiWorkflow> => {
      await assertOfNode(ctx.sql, input);
      return toApiWorkflow(await resumeWorkflow(ctx, { workflowId: input.workflowId, tenantId: input.tenantId }));
    },
  });

  return defineApiGroup('workflows', { list, get, abort, retry, pause, resume });
}
