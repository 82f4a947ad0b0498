import {
  ComputeError,
  type ErrorPath,
  type ModuleContext,
  type NewEvent,
  newId,
  type SqlExecutor,
  type StagedStart,
  type StartWorkflowInput,
  type WorkRequest,
} from '@better-compute/core';
import { assertStorableText } from '@better-compute/core/checks';
import { type CommitChange, type CommitChangeInput, commit } from '@better-compute/core/kernel';
import { getNode } from '@better-compute/core/nodes';
import type { ConfigUnitRegistry } from '../config-units/types';
import { MAX_PROFILE_VERSION } from '../define/types';
import {
  BUILTIN_TENANT,
  type FoundProfile,
  findProfile,
  latestShipped,
  markProfileUsed,
  type ShippedProfiles,
} from '../profiles/profile-store';
import { WORKFLOW_WORK_KIND } from './constants';
import { workflowEvent } from './events';
import { expandProfile } from './expand';
import { insertStepsSql, pendingWorkflow, registerStartSeed, type StartSeed, stepRecords } from './start-seed';
import type { StepRegistry } from './step-registry';
import type { LoadedWorkflow, WorkflowRecord } from './workflow-rows';

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

async function requireNode(tx: SqlExecutor, input: StartWorkflowInput): Promise<void> {
  if (input.nodeId !== undefined && !(await getNode(tx, input.nodeId, { tenantId: input.tenantId }))) {
    throw new ComputeError('NOT_FOUND', `node ${input.nodeId} not found`, { details: { path: ['nodeId'] } });
  }
}

interface PreparedStart {
  id: string;
  found: FoundProfile;
  changes: [CommitChange, ...CommitChange[]];
  events: NewEvent[];
  wake: WorkRequest;
  now: Date;
  seed: StartSeed;
}

/**
 * Everything of a start but its write: the input checked, the profile found (by `findProfile`, or, with `shippedUnread`
 * and a shipped profile of that id, taken without a read: its `wf` change then requires that no stored profile of the
 * tenant's, or public, shadows it), expanded, and the workflow's changes built (the `wf` insert first: it returns the
 * workflow's id, and inserts only for a node of the tenant and while no workflow is active on the key).
 */
async function prepareStart(
  sql: SqlExecutor,
  ctx: Pick<ModuleContext, 'clock' | 'commandKinds' | 'work'>,
  engine: Engine,
  input: StartWorkflowInput,
  options: { shippedUnread: boolean; heldBatch?: (kinds: readonly string[]) => Promise<string | undefined> },
): Promise<PreparedStart> {
  // An owner nobody reconciles would be queued when the workflow ends and fail there on every pass, unnoticed.
  if (input.owner !== undefined && ctx.work.handles && !ctx.work.handles(input.owner)) {
    throw new ComputeError('INVALID_INPUT', `owner '${input.owner}' is not a registered work kind (no reconciler)`, {
      details: { path: ['owner'] },
    });
  }
  const shipped = options.shippedUnread
    ? latestShipped(engine.profiles, input.profileId, input.profileVersion)
    : undefined;
  const found: FoundProfile | undefined = shipped
    ? { profile: shipped, tenantId: BUILTIN_TENANT, public: true, used: false }
    : await findProfile(sql, engine.profiles, input.tenantId, input.profileId, input.profileVersion);
  if (!found) {
    // The node is looked at only on a refusal (the insert checks it otherwise); a missing node is named first.
    await requireNode(sql, input);
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
    await requireNode(sql, input);
    throw error;
  });
  const id = newId('wf');
  const key = input.nodeId ?? id;
  const now = ctx.clock.now();
  // The owner scopes the workflow's batch from the kinds it records; a workflow with a batch waits for its release.
  // A batch is written before the workflow: the node is looked at first, so a refusal leaves no batch behind.
  let heldBatch: string | undefined;
  if (options.heldBatch) {
    await requireNode(sql, input);
    heldBatch = await options.heldBatch([...expansion.commandKinds]);
    if (heldBatch !== undefined) text(heldBatch, ['batchFor'], true);
  }
  const created = { id, tenantId: input.tenantId, nodeId: input.nodeId ?? null, profileId: found.profile.id };
  // `started`: the workflow after its first transitions, to insert as it is then (see `StartSeed`).
  const changesFor = (started?: LoadedWorkflow): [CommitChange, ...CommitChange[]] => [
    {
      name: 'wf',
      sql: ({ bind, guard }) => `INSERT INTO workflows (id, tenant_id, node_id, instance_id, key, profile_id,
          profile_version, profile_tenant_id, document, state, owner, command_kinds, batch_id, started_at, revision,
          created_at, updated_at)
        SELECT ${bind(id)}, t.tenant_id, ${bind(input.nodeId ?? null)}::text, ${bind(input.instanceId ?? null)}::text,
          ${bind(key)}, ${bind(found.profile.id)}, ${bind(found.profile.version)}::int, ${bind(found.tenantId)},
          ${bind(JSON.stringify(found.profile))}::jsonb,
          ${bind(started?.workflow.state ?? (heldBatch === undefined ? 'pending' : 'paused'))},
          ${bind(input.owner ?? null)}::text, ${bind(JSON.stringify(expansion.commandKinds))}::jsonb,
          ${bind(heldBatch ?? input.batchId ?? null)}::text, ${bind(started?.workflow.startedAt ?? null)}::timestamptz,
          ${bind(started?.workflow.revision ?? 0)}::bigint, t.at, t.at
        FROM (SELECT ${bind(input.tenantId)}::text AS tenant_id, ${bind(now)}::timestamptz AS at) t
        WHERE ${guard}${
          input.nodeId === undefined
            ? ''
            : ` AND EXISTS (SELECT 1 FROM nodes n WHERE n.id = ${bind(input.nodeId)} AND n.tenant_id = t.tenant_id)`
        }
        ON CONFLICT DO NOTHING RETURNING id`,
      // A shipped profile taken without a read is the one the tenant gets only while no stored one has its id.
      ...(shipped
        ? {
            requires: ({ bind }: Pick<CommitChangeInput, 'bind'>) =>
              `NOT EXISTS (SELECT 1 FROM profiles p WHERE p.id = ${bind(input.profileId)}
                 AND (p.tenant_id = ${bind(input.tenantId)} OR p.public)
                 AND (${bind(input.profileVersion ?? null)}::int IS NULL OR p.version = ${bind(input.profileVersion ?? null)}::int))`,
          }
        : {}),
    },
    {
      name: 'wf_steps',
      sql: ({ bind, guard }) => {
        const records = JSON.stringify(stepRecords(expansion.steps, started?.steps));
        return `${insertStepsSql(bind(id), `${bind(now)}::timestamptz`, bind(records))} WHERE ${guard}`;
      },
    },
  ];
  const pending = (node: WorkflowRecord['node']) =>
    pendingWorkflow({ id, key, input, found, commandKinds: expansion.commandKinds, steps: expansion.steps, now, node });
  return {
    id,
    found,
    changes: changesFor(),
    events: [workflowEvent({ ...created, profileVersion: found.profile.version }, 'workflow.created')],
    wake: { kind: WORKFLOW_WORK_KIND, key },
    now,
    seed: { pending, startedAs: changesFor },
  };
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
  const prepared = await prepareStart(tx, ctx, engine, input, {
    shippedUnread: false,
    ...(input.batchFor ? { heldBatch: input.batchFor } : {}),
  });
  // The workflow, its steps, `workflow.created` and the queued reconciler in one statement of the caller's
  // transaction; the workflow is inserted only for a node of the tenant (one look at it in the same statement).
  const written = await commit(
    { ...ctx, sql: tx },
    { changes: prepared.changes, events: prepared.events, wake: prepared.wake },
    tx,
  );
  if (written.status !== 'committed') {
    await requireNode(tx, input);
    const target = input.nodeId !== undefined ? `node ${input.nodeId}` : `instance ${input.instanceId}`;
    throw new ComputeError('CONFLICT', `${target} already has an active workflow`, {
      details: { path: [input.nodeId !== undefined ? 'nodeId' : 'instanceId'] },
    });
  }
  await markProfileUsed(tx, prepared.found, prepared.now);
  return { id: prepared.id };
}

/**
 * A start prepared for the caller's own commit (`WorkflowsPort.stageStart`): the workflow's changes (its `wf` insert
 * first, returning its id, a gate), `workflow.created` and the `workflow` reconciler's wake, written by the caller's
 * statement with whatever it writes besides, or not at all. A shipped profile is taken without a read (its insert
 * requires that no stored profile shadows it); a stored one is read, and one never used before is left to
 * {@link startWorkflow} (marking it used is a write of its own): undefined, as for a start held by `batchFor`. What
 * the caller's commit cannot write (a node gone, an active workflow, a stored profile after all) it finds `stale`;
 * then {@link startWorkflow} in a transaction says why. Bad input, an unknown profile or one that does not resolve
 * throw as a start does.
 *
 * @example
 * ```ts
 * const staged = await stageStartWorkflow(ctx.sql, ctx, engine, { tenantId, profileId: 'metal.inspect', nodeId, owner: 'metal' });
 * ```
 */
export async function stageStartWorkflow(
  sql: SqlExecutor,
  ctx: Pick<ModuleContext, 'clock' | 'commandKinds' | 'work'>,
  engine: Engine,
  raw: StartWorkflowInput,
): Promise<StagedStart | undefined> {
  const input = checkStart(raw);
  if (input.batchFor) return undefined;
  const prepared = await prepareStart(sql, ctx, engine, input, { shippedUnread: true });
  if (prepared.found.tenantId !== BUILTIN_TENANT && !prepared.found.used) return undefined;
  const staged: StagedStart = {
    id: prepared.id,
    changes: prepared.changes,
    events: prepared.events,
    wake: prepared.wake,
  };
  registerStartSeed(staged, prepared.seed);
  return staged;
}
