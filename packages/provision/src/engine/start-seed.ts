import type { StagedStart, StartWorkflowInput } from '@better-compute/core';
import type { CommitChange } from '@better-compute/core/kernel';
import type { FoundProfile } from '../profiles/profile-store';
import type { ExpandedStep } from './expand';
import type { LoadedWorkflow, StepRecord, WorkflowRecord } from './workflow-rows';

/**
 * A staged start's workflow, for the engine to take its first transitions before it is written: as a claim would read
 * it once inserted (`pending`, on the node as the caller knows it), and the changes that insert it as it is after
 * them (`startedAs`: its row's state, start and revision, its steps' runs) in place of the staged ones.
 */
export interface StartSeed {
  pending(node: WorkflowRecord['node']): LoadedWorkflow;
  startedAs(started: LoadedWorkflow): [CommitChange, ...CommitChange[]];
}

// The seeds of the starts `stageStartWorkflow` staged, by the object it returned (the one an end write hands back).
const seeds = new WeakMap<StagedStart, StartSeed>();

/**
 * Remembers the seed of a start staged as `staged` (see {@link startSeedOf}).
 *
 * @example
 * ```ts
 * registerStartSeed(staged, prepared.seed);
 * ```
 */
export function registerStartSeed(staged: StagedStart, seed: StartSeed): void {
  seeds.set(staged, seed);
}

/**
 * The seed of a start {@link stageStartWorkflow} staged, undefined for any other value.
 *
 * @example
 * ```ts
 * const seed = end.next && startSeedOf(end.next);
 * ```
 */
export function startSeedOf(staged: StagedStart): StartSeed | undefined {
  return seeds.get(staged);
}

/**
 * A start's workflow as a claim would read it once inserted: pending, every step pending, on `node`.
 *
 * @example
 * ```ts
 * const loaded = pendingWorkflow({ id, key, input, found, commandKinds, steps, now, node });
 * ```
 */
export function pendingWorkflow(start: {
  id: string;
  key: string;
  input: StartWorkflowInput;
  found: FoundProfile;
  commandKinds: readonly string[];
  steps: readonly ExpandedStep[];
  now: Date;
  node: WorkflowRecord['node'];
}): LoadedWorkflow {
  const { id, key, input, found, now } = start;
  return {
    workflow: {
      id,
      tenantId: input.tenantId,
      nodeId: input.nodeId ?? null,
      instanceId: input.instanceId ?? null,
      key,
      profileId: found.profile.id,
      profileVersion: found.profile.version,
      profileTenantId: found.tenantId,
      document: found.profile,
      state: 'pending',
      error: null,
      owner: input.owner ?? null,
      commandKinds: [...start.commandKinds],
      batchId: input.batchId ?? null,
      cancelReason: null,
      createdAt: now,
      updatedAt: now,
      startedAt: null,
      finishedAt: null,
      revision: 0,
      node: start.node,
    },
    steps: start.steps.map((step) => ({
      ...step,
      workflowId: id,
      state: 'pending',
      attempt: 0,
      attemptBase: 0,
      commandId: null,
      deadline: null,
      startedAt: null,
      firstStartedAt: null,
      finishedAt: null,
      result: null,
      error: null,
      rejoin: null,
    })),
  };
}

// Rows go in as one statement whatever the profile's length. A step's run columns come from its record when it has
// them (a start written with its first transitions), else are those of a pending step.
/** The insert of a workflow's steps from their records (see {@link stepRecords}), one statement. */
export const insertStepsSql = (workflowId: string, now: string, records: string) => `
INSERT INTO workflow_steps (workflow_id, step_id, position, phase, parent_step_id, action, resolution, runs_on, spec,
  timeout_ms, retries, on_failure, await, command_kind, state, attempt, attempt_base, deadline, started_at,
  first_started_at, finished_at, result, error, updated_at)
SELECT ${workflowId}, x.step_id, x.position, x.phase, x.parent_step_id, x.action, x.resolution, x.runs_on, x.spec,
  x.timeout_ms, x.retries, x.on_failure, x.await, x.command_kind, COALESCE(x.state, 'pending'), COALESCE(x.attempt, 0),
  COALESCE(x.attempt_base, 0), x.deadline, x.started_at, x.first_started_at, x.finished_at, x.result, x.error, ${now}
FROM jsonb_to_recordset(${records}::jsonb) AS x(step_id text, position int, phase text, parent_step_id text, action text,
  resolution text, runs_on text, spec jsonb, timeout_ms bigint, retries int, on_failure text, await text, command_kind text,
  state text, attempt int, attempt_base int, deadline timestamptz, started_at timestamptz, first_started_at timestamptz,
  finished_at timestamptz, result jsonb, error jsonb)`;

/** The steps' records for {@link insertStepsSql}: the expanded steps, with their runs as `started` has them. */
export function stepRecords(steps: readonly ExpandedStep[], started?: readonly StepRecord[]) {
  const runs = new Map(started?.map((s) => [s.stepId, s]));
  return steps.map((s) => {
    const run = runs.get(s.stepId);
    return {
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
      ...(run
        ? {
            state: run.state,
            attempt: run.attempt,
            attempt_base: run.attemptBase,
            deadline: run.deadline,
            started_at: run.startedAt,
            first_started_at: run.firstStartedAt,
            finished_at: run.finishedAt,
            result: run.result,
            error: run.error,
          }
        : {}),
    };
  });
}
