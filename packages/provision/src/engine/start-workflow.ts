import {
  ComputeError,
  type ErrorPath,
  type ModuleContext,
  newId,
  type SqlExecutor,
  type StartWorkflowInput,
} from '@better-compute/core';
import { assertStorableText } from '@better-compute/core/checks';
import { commit } from '@better-compute/core/kernel';
import { getNode } from '@better-compute/core/nodes';
import type { ConfigUnitRegistry } from '../config-units/types';
import { MAX_PROFILE_VERSION } from '../define/types';
import { findProfile, markProfileUsed, type ShippedProfiles } from '../profiles/profile-store';
import { WORKFLOW_WORK_KIND } from './constants';
import { workflowEvent } from './events';
import { type ExpandedStep, expandProfile } from './expand';
import type { StepRegistry } from './step-registry';

/** What the engine resolves steps, profiles and config units from: the provision module's registry. */
export interface Engine {
  readonly steps: StepRegistry;
  readonly profiles: ShippedProfiles;
  /** The built-in config units and the module's own (which replace built-ins of the same name). */
  readonly configUnits: ConfigUnitRegistry;
}

const MAX_TEXT = 512;

function text(value: unknown, path: ErrorPath, required: boolean): string | undefined {
  if (value === undefined && !required) return undefined;
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_TEXT) {
    throw new ComputeError(
      'INVALID_INPUT',
      `${path.join('.')} must be a non-empty string of at most ${MAX_TEXT} characters`,
      {
        details: { path },
      },
    );
  }
  assertStorableText(value, path);
  return value;
}

function checkStart(
  input: StartWorkflowInput,
): Required<Pick<StartWorkflowInput, 'tenantId' | 'profileId'>> & StartWorkflowInput {
  if (typeof input !== 'object' || input === null) {
    throw new ComputeError('INVALID_INPUT', 'start takes an object', { details: { path: [] } });
  }
  text(input.tenantId, ['tenantId'], true);
  text(input.profileId, ['profileId'], true);
  const version = input.profileVersion;
  if (version !== undefined && (!Number.isSafeInteger(version) || version < 1 || version > MAX_PROFILE_VERSION)) {
    throw new ComputeError('INVALID_INPUT', `profileVersion must be a whole number from 1 to ${MAX_PROFILE_VERSION}`, {
      details: { path: ['profileVersion'] },
    });
  }
  text(input.nodeId, ['nodeId'], false);
  text(input.instanceId, ['instanceId'], false);
  text(input.owner, ['owner'], false);
  text(input.batchId, ['batchId'], false);
  if (input.batchFor !== undefined && (typeof input.batchFor !== 'function' || input.batchId !== undefined)) {
    throw new ComputeError('INVALID_INPUT', 'batchFor must be a function, and not given with batchId', {
      details: { path: ['batchFor'] },
    });
  }
  if (input.nodeId !== undefined && input.instanceId !== undefined) {
    throw new ComputeError('INVALID_INPUT', 'a workflow targets a node or an instance, not both', {
      details: { path: ['instanceId'] },
    });
  }
  return input;
}

// Rows go in as one statement whatever the profile's length.
const insertStepsSql = (workflowId: string, now: string, records: string) => `
INSERT INTO workflow_steps (workflow_id, step_id, position, phase, parent_step_id, action, resolution, runs_on, spec,
  timeout_ms, retries, on_failure, await, command_kind, state, attempt, attempt_base, updated_at)
SELECT ${workflowId}, x.step_id, x.position, x.phase, x.parent_step_id, x.action, x.resolution, x.runs_on, x.spec,
  x.timeout_ms, x.retries, x.on_failure, x.await, x.command_kind, 'pending', 0, 0, ${now}
FROM jsonb_to_recordset(${records}::jsonb) AS x(step_id text, position int, phase text, parent_step_id text, action text,
  resolution text, runs_on text, spec jsonb, timeout_ms bigint, retries int, on_failure text, await text, command_kind text)`;

function stepRecords(steps: readonly ExpandedStep[]) {
  return steps.map((s) => ({
    step_id: s.stepId,
    position: s.position,
    phase: s.phase,
    parent_step_id: s.parentStepId,
    action: s.action,
    resolution: s.resolution,
    runs_on: s.runsOn,
    spec: s.spec,
    timeout_ms: s.timeoutMs,
    retries: s.retries,
    on_failure: s.onFailure,
    await: s.awaitRejoin ? 'rejoin' : null,
    command_kind: s.commandKind,
  }));
}

async function requireNode(tx: SqlExecutor, input: StartWorkflowInput): Promise<void> {
  if (input.nodeId !== undefined && !(await getNode(tx, input.nodeId, { tenantId: input.tenantId }))) {
    throw new ComputeError('NOT_FOUND', `node ${input.nodeId} not found`, { details: { path: ['nodeId'] } });
  }
}

/**
 * Starts a workflow in the caller's transaction: loads the pinned profile version (the tenant's own, then a public
 * stored one, then a shipped one), expands it, snapshots the document, marks the version used, inserts the workflow
 * and its rows, publishes `workflow.created` and queues the `workflow` reconciler (a workflow held by `batchFor`
 * starts `paused` and waits for `resume`); the workflow, its steps, the event and the queued reconciler are one
 * statement. A node (or instance) with an active workflow is CONFLICT; an unknown node (or one of another tenant)
 * NOT_FOUND, named before anything else; an unknown profile NOT_FOUND; a profile that does not resolve INVALID_INPUT
 * listing every issue (including a `hostConfig` that does not resolve: an unknown unit or invalid settings). A
 * refusal writes nothing (but a batch `batchFor` created, which the caller's transaction or savepoint undoes).
 *
 * @example
 * ```ts
 * const { id } = await db.transaction((tx) => startWorkflow(tx, ctx, engine, { tenantId: 'root', profileId: 'deploy', profileVersion: 1, nodeId, owner: 'metal' }));
 * ```
 */
export async function startWorkflow(
  tx: SqlExecutor,
  ctx: Pick<ModuleContext, 'sql' | 'clock' | 'commands' | 'events' | 'work' | 'commandKinds'>,
  engine: Engine,
  raw: StartWorkflowInput,
): Promise<{ id: string }> {
  const input = checkStart(raw);
  // An owner nobody reconciles would be queued when the workflow ends and fail there on every pass, unnoticed.
  if (input.owner !== undefined && ctx.work.handles && !ctx.work.handles(input.owner)) {
    throw new ComputeError('INVALID_INPUT', `owner '${input.owner}' is not a registered work kind (no reconciler)`, {
      details: { path: ['owner'] },
    });
  }
  const found = await findProfile(tx, engine.profiles, input.tenantId, input.profileId, input.profileVersion);
  if (!found) {
    // The node is looked at only on a refusal (the insert checks it otherwise); a missing node is named first.
    await requireNode(tx, input);
    const version = input.profileVersion === undefined ? '' : ` version ${input.profileVersion}`;
    throw new ComputeError('NOT_FOUND', `profile ${input.profileId}${version} not found`, {
      details: { path: [input.profileVersion === undefined ? 'profileId' : 'profileVersion'] },
    });
  }
  const expansion = await expandProfile(found.profile, {
    steps: engine.steps,
    commandKinds: ctx.commandKinds,
    configUnits: engine.configUnits,
  }).catch(async (error: unknown) => {
    await requireNode(tx, input);
    throw error;
  });
  const id = newId('wf');
  const key = input.nodeId ?? id;
  const now = ctx.clock.now();
  // The owner scopes the workflow's batch from the kinds it records; a workflow with a batch waits for its release.
  // A batch is written before the workflow: the node is looked at first, so a refusal leaves no batch behind.
  let heldBatch: string | undefined;
  if (input.batchFor) {
    await requireNode(tx, input);
    heldBatch = await input.batchFor([...expansion.commandKinds]);
    if (heldBatch !== undefined) text(heldBatch, ['batchFor'], true);
  }
  const created = { id, tenantId: input.tenantId, nodeId: input.nodeId ?? null, profileId: found.profile.id };
  // The workflow, its steps, `workflow.created` and the queued reconciler in one statement of the caller's
  // transaction; the workflow is inserted only for a node of the tenant (one look at it in the same statement).
  const written = await commit(
    { ...ctx, sql: tx },
    {
      changes: [
        {
          name: 'wf',
          sql: ({ bind, guard }) => `INSERT INTO workflows (id, tenant_id, node_id, instance_id, key, profile_id,
              profile_version, profile_tenant_id, document, state, owner, command_kinds, batch_id, created_at, updated_at)
            SELECT ${bind(id)}, t.tenant_id, ${bind(input.nodeId ?? null)}::text, ${bind(input.instanceId ?? null)}::text,
              ${bind(key)}, ${bind(found.profile.id)}, ${bind(found.profile.version)}::int, ${bind(found.tenantId)},
              ${bind(JSON.stringify(found.profile))}::jsonb, ${bind(heldBatch === undefined ? 'pending' : 'paused')},
              ${bind(input.owner ?? null)}::text, ${bind(JSON.stringify(expansion.commandKinds))}::jsonb,
              ${bind(heldBatch ?? input.batchId ?? null)}::text, t.at, t.at
            FROM (SELECT ${bind(input.tenantId)}::text AS tenant_id, ${bind(now)}::timestamptz AS at) t
            WHERE ${guard}${
              input.nodeId === undefined
                ? ''
                : ` AND EXISTS (SELECT 1 FROM nodes n WHERE n.id = ${bind(input.nodeId)} AND n.tenant_id = t.tenant_id)`
            }
            ON CONFLICT DO NOTHING RETURNING id`,
        },
        {
          name: 'wf_steps',
          sql: ({ bind, guard }) =>
            `${insertStepsSql(bind(id), `${bind(now)}::timestamptz`, bind(JSON.stringify(stepRecords(expansion.steps))))} WHERE ${guard}`,
        },
      ],
      events: [workflowEvent({ ...created, profileVersion: found.profile.version }, 'workflow.created')],
      wake: { kind: WORKFLOW_WORK_KIND, key },
    },
    tx,
  );
  if (written.status !== 'committed') {
    await requireNode(tx, input);
    const target = input.nodeId !== undefined ? `node ${input.nodeId}` : `instance ${input.instanceId}`;
    throw new ComputeError('CONFLICT', `${target} already has an active workflow`, {
      details: { path: [input.nodeId !== undefined ? 'nodeId' : 'instanceId'] },
    });
  }
  await markProfileUsed(tx, found, now);
  return { id };
}
