import {
  ComputeError,
  type ErrorPath,
  type ModuleContext,
  newId,
  type SqlExecutor,
  type StartWorkflowInput,
} from '@better-compute/core';
import { assertStorableText } from '@better-compute/core/checks';
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
const INSERT_STEPS = `
INSERT INTO workflow_steps (workflow_id, step_id, position, phase, parent_step_id, action, resolution, runs_on, spec,
  timeout_ms, retries, on_failure, await, command_kind, state, attempt, attempt_base, updated_at)
SELECT $1, x.step_id, x.position, x.phase, x.parent_step_id, x.action, x.resolution, x.runs_on, x.spec, x.timeout_ms,
  x.retries, x.on_failure, x.await, x.command_kind, 'pending', 0, 0, $2
FROM jsonb_to_recordset($3::jsonb) AS x(step_id text, position int, phase text, parent_step_id text, action text,
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

/**
 * Starts a workflow in the caller's transaction: loads the pinned profile version (the tenant's own, then a public
 * stored one, then a shipped one), expands it, snapshots the document, marks the version used, inserts the workflow
 * and its rows, publishes `workflow.created` and queues the `workflow` reconciler (a workflow held by `batchFor`
 * starts `paused` and waits for `resume`). A node (or instance) with an active
 * workflow is CONFLICT; an unknown profile or node NOT_FOUND; a profile that does not resolve INVALID_INPUT listing
 * every issue (including a `hostConfig` that does not resolve: an unknown unit or invalid settings).
 *
 * @example
 * ```ts
 * const { id } = await db.transaction((tx) => startWorkflow(tx, ctx, engine, { tenantId: 'root', profileId: 'deploy', profileVersion: 1, nodeId, owner: 'metal' }));
 * ```
 */
export async function startWorkflow(
  tx: SqlExecutor,
  ctx: Pick<ModuleContext, 'clock' | 'events' | 'work' | 'commandKinds'>,
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
  if (input.nodeId !== undefined) {
    if (!(await getNode(tx, input.nodeId, { tenantId: input.tenantId }))) {
      throw new ComputeError('NOT_FOUND', `node ${input.nodeId} not found`, { details: { path: ['nodeId'] } });
    }
  }
  const found = await findProfile(tx, engine.profiles, input.tenantId, input.profileId, input.profileVersion);
  if (!found) {
    const version = input.profileVersion === undefined ? '' : ` version ${input.profileVersion}`;
    throw new ComputeError('NOT_FOUND', `profile ${input.profileId}${version} not found`, {
      details: { path: [input.profileVersion === undefined ? 'profileId' : 'profileVersion'] },
    });
  }
  const expansion = await expandProfile(found.profile, {
    steps: engine.steps,
    commandKinds: ctx.commandKinds,
    configUnits: engine.configUnits,
  });
  const id = newId('wf');
  const key = input.nodeId ?? id;
  const now = ctx.clock.now();
  // The owner scopes the workflow's batch from the kinds it records; a workflow with a batch waits for its release.
  const heldBatch = input.batchFor ? await input.batchFor([...expansion.commandKinds]) : undefined;
  if (heldBatch !== undefined) text(heldBatch, ['batchFor'], true);
  const inserted = await tx.query(
    `INSERT INTO workflows (id, tenant_id, node_id, instance_id, key, profile_id, profile_version, profile_tenant_id,
       document, state, owner, command_kinds, batch_id, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $14, $10, $11::jsonb, $12, $13, $13)
     ON CONFLICT DO NOTHING RETURNING id`,
    [
      id,
      input.tenantId,
      input.nodeId ?? null,
      input.instanceId ?? null,
      key,
      found.profile.id,
      found.profile.version,
      found.tenantId,
      JSON.stringify(found.profile),
      input.owner ?? null,
      JSON.stringify(expansion.commandKinds),
      heldBatch ?? input.batchId ?? null,
      now,
      heldBatch === undefined ? 'pending' : 'paused',
    ],
  );
  if (inserted.rowCount === 0) {
    const target = input.nodeId !== undefined ? `node ${input.nodeId}` : `instance ${input.instanceId}`;
    throw new ComputeError('CONFLICT', `${target} already has an active workflow`, {
      details: { path: [input.nodeId !== undefined ? 'nodeId' : 'instanceId'] },
    });
  }
  await tx.query(INSERT_STEPS, [id, now, JSON.stringify(stepRecords(expansion.steps))]);
  await markProfileUsed(tx, found, now);
  const created = { id, tenantId: input.tenantId, nodeId: input.nodeId ?? null, profileId: found.profile.id };
  await ctx.events.publish(
    tx,
    workflowEvent({ ...created, profileVersion: found.profile.version }, 'workflow.created'),
  );
  await ctx.work.enqueue(tx, { kind: WORKFLOW_WORK_KIND, key });
  return { id };
}
