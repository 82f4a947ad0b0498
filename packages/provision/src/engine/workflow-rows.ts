import type { Command, CommandState, ComputeErrorCode, Json, Labels, SqlExecutor } from '@better-compute/core';
import {
  commandFromJson,
  commandJsonSql,
  connectedSiteAgentAtSql,
  currentAgentSessionAtSql,
  DEFAULT_SESSION_STALE_AFTER_MS,
} from '@better-compute/core/kernel';
import { joinNodeSql, nodeColumnSql } from '@better-compute/core/nodes';
import type { Profile, ProfileStep, StepRunsOn, WorkflowPreload } from '../define/types';
import { ACTIVE_STATES_SQL, type StepPhase, type StepState, type WorkflowState } from './constants';
import type { ExpandedStep } from './expand';

/** The error a failed step records, and (prefixed with the step) the workflow's own error. */
export interface StepError {
  code: ComputeErrorCode;
  message: string;
  reason?: string;
}

/** A workflow's error: `<stepId> (<action>): <message>` with the step's code; `rescue: true` under `onFailure: 'rescue'`. */
export interface WorkflowError extends StepError {
  stepId: string;
  action: string;
  rescue?: true;
}

/** A workflow row, with its node's site, pool and current labels. */
export interface WorkflowRecord {
  id: string;
  tenantId: string;
  nodeId: string | null;
  instanceId: string | null;
  key: string;
  profileId: string;
  profileVersion: number;
  profileTenantId: string;
  document: Profile;
  state: WorkflowState;
  error: WorkflowError | null;
  owner: string | null;
  commandKinds: string[];
  batchId: string | null;
  cancelReason: string | null;
  createdAt: Date;
  updatedAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
  /** Bumped by every change to the workflow or its steps. */
  revision: number;
  node: { id: string; siteId: string | undefined; poolId?: string; labels: Labels } | undefined;
}

/** A `workflow_steps` row: the expanded step, and where its run stands. */
export interface StepRecord extends ExpandedStep {
  workflowId: string;
  state: StepState;
  attempt: number;
  attemptBase: number;
  commandId: string | null;
  deadline: Date | null;
  startedAt: Date | null;
  firstStartedAt: Date | null;
  finishedAt: Date | null;
  result: Json | null;
  error: StepError | null;
  rejoin: { nodeId: string; bootId: string | null; role: string | null } | null;
}

type Raw = Record<string, unknown>;

const date = (value: unknown): Date | null =>
  value === null || value === undefined ? null : new Date(value as string);

function toStep(r: Raw): StepRecord {
  return {
    workflowId: r.workflow_id as string,
    stepId: r.step_id as string,
    position: Number(r.position),
    phase: r.phase as StepPhase,
    parentStepId: (r.parent_step_id as string | null) ?? null,
    action: r.action as string,
    resolution: r.resolution as 'step' | 'driver',
    runsOn: r.runs_on as StepRunsOn,
    spec: r.spec as ProfileStep,
    timeoutMs: Number(r.timeout_ms),
    retries: Number(r.retries),
    onFailure: r.on_failure as StepRecord['onFailure'],
    awaitRejoin: r.await === 'rejoin',
    commandKind: (r.command_kind as string | null) ?? null,
    state: r.state as StepState,
    attempt: Number(r.attempt),
    attemptBase: Number(r.attempt_base),
    commandId: (r.command_id as string | null) ?? null,
    deadline: date(r.deadline),
    startedAt: date(r.started_at),
    firstStartedAt: date(r.first_started_at),
    finishedAt: date(r.finished_at),
    result: (r.result as Json | undefined) ?? null,
    error: (r.error as StepError | null) ?? null,
    rejoin: (r.rejoin as StepRecord['rejoin']) ?? null,
  };
}

function toWorkflow(r: Raw): WorkflowRecord {
  const nodeId = (r.node_id as string | null) ?? null;
  const poolId = r.node_pool_id as string | null;
  return {
    id: r.id as string,
    tenantId: r.tenant_id as string,
    nodeId,
    instanceId: (r.instance_id as string | null) ?? null,
    key: r.key as string,
    profileId: r.profile_id as string,
    profileVersion: Number(r.profile_version),
    profileTenantId: r.profile_tenant_id as string,
    document: r.document as Profile,
    state: r.state as WorkflowState,
    error: (r.error as WorkflowError | null) ?? null,
    owner: (r.owner as string | null) ?? null,
    commandKinds: (r.command_kinds as string[]) ?? [],
    batchId: (r.batch_id as string | null) ?? null,
    cancelReason: (r.cancel_reason as string | null) ?? null,
    createdAt: date(r.created_at) as Date,
    updatedAt: date(r.updated_at) as Date,
    startedAt: date(r.started_at),
    finishedAt: date(r.finished_at),
    revision: Number(r.revision),
    node:
      nodeId === null || r.node_exists !== true
        ? undefined
        : {
            id: nodeId,
            siteId: (r.node_site_id as string | null) ?? undefined,
            ...(poolId ? { poolId } : {}),
            labels: (r.node_labels as Labels | null) ?? {},
          },
  };
}

/** The command of a waiting agent step, as read with its workflow. */
export interface InFlightCommand {
  id: string;
  kind: string;
  state: CommandState;
  reason: string | null;
  result: Uint8Array | undefined;
  notAfter: Date;
}

/** A workflow with all its steps in the order they run, and the command its waiting step sent (if any). */
export interface LoadedWorkflow {
  workflow: WorkflowRecord;
  steps: StepRecord[];
  inFlightCommand?: InFlightCommand;
  /** What the claim read for the running control-plane steps' runs (only a claim's preload has it). */
  stepReads?: StepReads;
}

/**
 * The most commands the claim reads for one running step's attempt: a step with more (a long `poll`) reads its own,
 * as does one whose result is larger than {@link MAX_PRELOADED_RESULT_BYTES}, so a claim stays small.
 */
export const MAX_PRELOADED_STEP_COMMANDS = 16;

/** The largest command result the claim reads for a step's run (64 KiB). */
export const MAX_PRELOADED_RESULT_BYTES = 65_536;

/**
 * What the engine's own plain reads would find for the workflow's node, read by the claim (see `ClaimAnswers`): the
 * site agent a site step's command would go to (the boot-lease holder first; null when none is connected) and the
 * node's current agent session (null when none).
 */
export interface ClaimKnown {
  siteAgentId: string | null;
  session: { bootId: string | null; role: string | null } | null;
}

/**
 * The running steps' current attempts' commands (undefined when there were too many, or one too large, to read with
 * the claim), the modules' workflow preloads, and what the engine's plain reads would find for the node (`known`,
 * absent for a workflow without a node), as the claim read them.
 */
export interface StepReads {
  commands: Command[] | undefined;
  reads: Record<string, Json>;
  known?: ClaimKnown;
}

function toClaimKnown(raw: unknown): ClaimKnown | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const { siteAgentId, session } = raw as { siteAgentId?: unknown; session?: unknown };
  if (siteAgentId !== null && typeof siteAgentId !== 'string') return undefined;
  if (session === null) return { siteAgentId, session: null };
  if (typeof session !== 'object') return undefined;
  const { bootId, role } = session as { bootId?: unknown; role?: unknown };
  const text = (value: unknown) => (typeof value === 'string' ? value : null);
  return { siteAgentId, session: { bootId: text(bootId), role: text(role) } };
}

function toStepReads(raw: unknown): StepReads | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const { commands, reads, known: rawKnown } = raw as { commands?: unknown; reads?: unknown; known?: unknown };
  if (typeof reads !== 'object' || reads === null || Array.isArray(reads)) return undefined;
  const known = toClaimKnown(rawKnown);
  const rest = { reads: reads as Record<string, Json>, ...(known ? { known } : {}) };
  if (commands === null) return { commands: undefined, ...rest };
  if (!Array.isArray(commands)) return undefined;
  const parsed = commands.map(commandFromJson);
  if (parsed.some((c) => c === undefined)) return undefined;
  return { commands: parsed as Command[], ...rest };
}

function toInFlightCommand(r: Raw | null | undefined): InFlightCommand | undefined {
  if (!r) return undefined;
  return {
    id: r.id as string,
    kind: r.kind as string,
    state: r.state as CommandState,
    reason: (r.reason as string | null) ?? null,
    result: typeof r.result === 'string' ? Uint8Array.from(Buffer.from(r.result, 'base64')) : undefined,
    notAfter: new Date(r.notAfter as string),
  };
}

// One statement: the workflow row, its node's coordinates and labels, and every step in order. `source` is the
// workflows table, or a CTE that has just locked (and bumped) the row.
// The node's part comes from core's node repository, which owns the table's shape.
const NODE_COLUMNS = `${nodeColumnSql('id', 'n')} IS NOT NULL AS node_exists, ${nodeColumnSql('siteId', 'n')} AS node_site_id,
  ${nodeColumnSql('poolId', 'n')} AS node_pool_id, ${nodeColumnSql('labels', 'n')} AS node_labels`;
const NODE_JOIN = joinNodeSql('n', 'w.node_id');
const selectWorkflowFrom = (source: string, extraColumns = '') => `
SELECT w.*, ${NODE_COLUMNS},${extraColumns}
  (SELECT coalesce(json_agg(s ORDER BY s.position), '[]'::json) FROM workflow_steps s WHERE s.workflow_id = w.id) AS steps,
  (SELECT json_build_object('id', c.id, 'kind', c.kind, 'state', c.state, 'reason', c.reason,
     'result', encode(c.result, 'base64'), 'notAfter', c.not_after)
   FROM workflow_steps s JOIN commands c ON c.id = s.command_id
   WHERE s.workflow_id = w.id AND s.state = 'waiting' LIMIT 1) AS in_flight_command
FROM ${source} w ${NODE_JOIN}`;

const activeOfKey = (key: string) => `key = ${key} AND state IN ${ACTIVE_STATES_SQL} ORDER BY created_at, id LIMIT 1`;

function loaded(rows: Raw[]): LoadedWorkflow | undefined {
  const row = rows[0];
  if (!row) return undefined;
  const inFlightCommand = toInFlightCommand(row.in_flight_command as Raw | null);
  const stepReads = toStepReads(row.step_reads);
  return {
    workflow: toWorkflow(row),
    steps: (row.steps as Raw[]).map(toStep),
    ...(inFlightCommand ? { inFlightCommand } : {}),
    ...(stepReads ? { stepReads } : {}),
  };
}

/**
 * Reads the active workflow of a reconciler key without locking it: what the reconciler plans its next transitions
 * from, writing them only while the revision it read is still current (see `commitPlan`).
 *
 * @example
 * ```ts
 * const snapshot = await readActiveWorkflow(ctx.sql, nodeId);
 * ```
 */
export async function readActiveWorkflow(sql: SqlExecutor, key: string): Promise<LoadedWorkflow | undefined> {
  const { rows } = await sql.query<Raw>(selectWorkflowFrom(`(SELECT * FROM workflows WHERE ${activeOfKey('$1')})`), [
    key,
  ]);
  return loaded(rows);
}

/**
 * The claim's `known` (see {@link ClaimKnown}) of the workflow `w`'s node, as `siteAgentFor`'s first choice among the
 * site's connected agents and `currentAgentSession` would read them at the claim's `now`. The site goes in as a
 * subquery of its own: `connectedSiteAgentAtSql` names its nodes `n`.
 */
function claimKnownSql(now: string): string {
  const stale = `(${now} - interval '${DEFAULT_SESSION_STALE_AFTER_MS} milliseconds')`;
  const site = `(SELECT ${nodeColumnSql('siteId', 'x')} FROM nodes x WHERE ${nodeColumnSql('id', 'x')} = w.node_id)`;
  return `CASE WHEN w.node_id IS NULL THEN NULL ELSE json_build_object(
      'siteAgentId', (${connectedSiteAgentAtSql(site, stale)}),
      'session', (${currentAgentSessionAtSql('w.node_id', stale, "json_build_object('bootId', s.boot_id, 'role', s.role)")})) END`;
}

/**
 * What {@link readActiveWorkflow} reads, as one JSON value (null when the key has no active workflow): the `workflow`
 * reconciler's preload, read by the worker's claim in its own statement. `key` and `now` are SQL expressions of the
 * key and the claim's now. With it, for the runs of its running control-plane steps (`stepReads`): their current
 * attempts' commands, found through the commands' workflow and step (an index; at most
 * {@link MAX_PRELOADED_STEP_COMMANDS}, none larger than {@link MAX_PRELOADED_RESULT_BYTES}, else not read), and each
 * module's workflow preload.
 *
 * @example
 * ```ts
 * const preload = { sql: (key: string, now: string) => activeWorkflowPreloadSql(key, now, workflowPreloadsOf(modules)) };
 * ```
 */
export function activeWorkflowPreloadSql(key: string, now: string, preloads: readonly WorkflowPreload[] = []): string {
  // Ids are checked (WORKFLOW_PRELOAD_ID_PATTERN): safe as literals.
  const reads = preloads.map((p) => `'${p.id}', (${p.sql({ workflow: 'w', now })})`);
  // The current attempt's commands (keyed wf:<id>:<step>#<attempt>[:<key>]), the newest first; NULL when there are
  // more than the cap or a result is too large (the run then looks its commands up itself).
  const attemptKey = `'wf:' || w.id || ':' || s.step_id || '#' || s.attempt`;
  const stepReads = `
  json_build_object(
    'commands', (SELECT CASE WHEN count(*) > ${MAX_PRELOADED_STEP_COMMANDS}
          OR coalesce(bool_or(octet_length(x.result) > ${MAX_PRELOADED_RESULT_BYTES}), false) THEN NULL
        ELSE coalesce(json_agg(${commandJsonSql('x')}), '[]'::json) END
      FROM (SELECT c.* FROM workflow_steps s JOIN commands c ON c.workflow_id = s.workflow_id AND c.step_id = s.step_id
        WHERE s.workflow_id = w.id AND s.state = 'running' AND c.workflow_id IS NOT NULL
          AND (c.key = ${attemptKey} OR starts_with(c.key, ${attemptKey} || ':'))
        ORDER BY c.created_at DESC, c.id DESC LIMIT ${MAX_PRELOADED_STEP_COMMANDS + 1}) x),
    'reads', json_build_object(${reads.join(', ')}),
    'known', ${claimKnownSql(now)}) AS step_reads,`;
  const source = `(SELECT * FROM workflows WHERE ${activeOfKey(key)})`;
  return `(SELECT to_json(x) FROM (${selectWorkflowFrom(source, stepReads)}) x)`;
}

/**
 * The preloaded value as {@link readActiveWorkflow} would have returned it: the snapshot, `null` when the claim found
 * no active workflow, `undefined` when nothing usable was preloaded.
 *
 * @example
 * ```ts
 * const snapshot = preloadedWorkflow(ctx) ?? (await readActiveWorkflow(ctx.sql, key));
 * ```
 */
export function preloadedWorkflow(ctx: { preloaded?: unknown }): LoadedWorkflow | null | undefined {
  if (!('preloaded' in ctx)) return undefined;
  const value = ctx.preloaded;
  if (value === null) return null;
  if (typeof value !== 'object' || !Array.isArray((value as Raw).steps)) return undefined;
  return loaded([value as Raw]);
}

/**
 * Loads a workflow by id, locking its row (and bumping its revision) when `lock` is set: the verbs do, so they
 * serialize with the reconciler.
 *
 * @example
 * ```ts
 * const found = await loadWorkflow(tx, workflowId, { lock: true });
 * ```
 */
export async function loadWorkflow(
  sql: SqlExecutor,
  workflowId: string,
  options: { lock?: boolean } = {},
): Promise<LoadedWorkflow | undefined> {
  const source = options.lock
    ? `WITH locked AS (UPDATE workflows SET revision = revision + 1 WHERE id = $1 RETURNING *) ${selectWorkflowFrom('locked')}`
    : `${selectWorkflowFrom('workflows')} WHERE w.id = $1`;
  const { rows } = await sql.query<Raw>(source, [workflowId]);
  return loaded(rows);
}

const STEP_COLUMNS: Record<string, string> = {
  state: 'state',
  attempt: 'attempt',
  attemptBase: 'attempt_base',
  commandId: 'command_id',
  deadline: 'deadline',
  startedAt: 'started_at',
  firstStartedAt: 'first_started_at',
  finishedAt: 'finished_at',
  result: 'result',
  error: 'error',
  rejoin: 'rejoin',
};

/** The step fields a transition may change (the keys of {@link StepChange}), as `commitPlan` writes them. */
export const STEP_CHANGE_FIELDS = Object.keys(STEP_COLUMNS) as (keyof StepChange)[];

/** The step fields a transition may change. */
export type StepChange = Partial<
  Pick<
    StepRecord,
    | 'state'
    | 'attempt'
    | 'attemptBase'
    | 'commandId'
    | 'deadline'
    | 'startedAt'
    | 'firstStartedAt'
    | 'finishedAt'
    | 'result'
    | 'error'
    | 'rejoin'
  >
>;
