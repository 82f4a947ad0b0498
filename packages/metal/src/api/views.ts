import type { QuorumPort, SqlExecutor } from '@better-compute/core';
import { ACTIVE_WORKFLOW_STATES } from '@better-compute/provision';
import type { HoldPoint } from '../lifecycle/decide';
import type { NodeState, PhaseState } from '../lifecycle/states';
import type { MachineError, MachineRecord } from '../machines/machine-rows';
import { awaitingOf, HELD_WORKFLOW_SQL, type MachineAwaiting } from '../machines/quorum';

/** The step of a machine's active workflow that is in flight. */
export interface MachineStepView {
  stepId: string;
  action: string;
  state: string;
  attempt: number;
  deadline: string | null;
}

/** A machine's active workflow (whoever started it), as `metal.get` shows it. */
export interface MachineWorkflowView {
  id: string;
  profileId: string;
  profileVersion: number;
  state: string;
  /** The step in flight, or null between steps. */
  step: MachineStepView | null;
  /** The destructive-command batch its destructive commands carry (null when the quorum is off or none is sent). */
  batchId: string | null;
  /** It waits for its batch's approvals (held since its start). */
  held: boolean;
}

/** A machine as `metal.list` returns it. */
export interface MachineSummary {
  nodeId: string;
  tenantId: string;
  siteId: string;
  name: string | null;
  pool: string | null;
  state: NodeState;
  /** The machine rests in `enrolling` or `inspecting` as its enroll asked; `inspect`/`commission` continue it. */
  held: boolean;
  labels: Record<string, string>;
  /** The active workflow's id and its step in flight. */
  workflowId: string | null;
  stepId: string | null;
  lastError: MachineError | null;
  /**
   * The batch the machine's workflow waits on, with its approvals and threshold, until a threshold of approvers signed
   * it (`batches.approve`); null when nothing waits.
   */
  awaiting: MachineAwaiting | null;
  createdAt: string;
  updatedAt: string;
}

/** A machine as `metal.get` and the verbs return it. */
export interface MachineView extends Omit<MachineSummary, 'workflowId' | 'stepId'> {
  /** The phase under way, or the phase a failed machine failed in (what `recover` runs again). */
  phase: PhaseState | null;
  /** The phase under way is part of an enroll, which goes on by itself to `available`. */
  enrolling: boolean;
  holdAfter: HoldPoint | null;
  facts: Record<string, unknown>;
  bmc: { address: string; driver: string; hasCredential: boolean };
  macs: string[];
  workflow: MachineWorkflowView | null;
  /** What the deploy under way (or the last one, until release) asked for; user data only as "given". */
  deploy: { profileId: string; profileVersion: number | null; image: string | null; userData: boolean } | null;
}

type Row = Record<string, unknown>;

const iso = (value: unknown): string | null =>
  value === null || value === undefined
    ? null
    : (value instanceof Date ? value : new Date(String(value))).toISOString();

/** SQL of a machine's (`m`) active workflow and its step in flight, for a `LEFT JOIN LATERAL … ON TRUE` as `aw`. */
export const ACTIVE_WORKFLOW_LATERAL = (statesParam: string) => `
  LEFT JOIN LATERAL (
    SELECT w.id AS aw_id, w.profile_id AS aw_profile_id, w.profile_version AS aw_profile_version, w.state AS aw_state,
      s.step_id AS aw_step_id, s.action AS aw_action, s.state AS aw_step_state, s.attempt AS aw_attempt,
      s.deadline AS aw_deadline, w.batch_id AS aw_batch_id, ${HELD_WORKFLOW_SQL('w')} AS aw_held
    FROM workflows w
    LEFT JOIN LATERAL (
      SELECT step_id, action, state, attempt, deadline FROM workflow_steps
      WHERE workflow_id = w.id AND state IN ('running', 'waiting') ORDER BY position LIMIT 1
    ) s ON TRUE
    WHERE w.node_id = m.node_id AND w.state = ANY(${statesParam}::text[])
    ORDER BY w.created_at DESC LIMIT 1
  ) aw ON TRUE`;

/** The active workflow states, as the parameter {@link ACTIVE_WORKFLOW_LATERAL} reads. */
export const ACTIVE_STATES_PARAM: string[] = [...ACTIVE_WORKFLOW_STATES];

/** The active workflow of a row read with {@link ACTIVE_WORKFLOW_LATERAL}. */
export function workflowOf(r: Row): MachineWorkflowView | null {
  if (r.aw_id === null || r.aw_id === undefined) return null;
  return {
    id: r.aw_id as string,
    profileId: r.aw_profile_id as string,
    profileVersion: Number(r.aw_profile_version),
    state: r.aw_state as string,
    batchId: (r.aw_batch_id as string | null | undefined) ?? null,
    held: r.aw_held === true,
    step:
      r.aw_step_id === null || r.aw_step_id === undefined
        ? null
        : {
            stepId: r.aw_step_id as string,
            action: r.aw_action as string,
            state: r.aw_step_state as string,
            attempt: Number(r.aw_attempt),
            deadline: iso(r.aw_deadline),
          },
  };
}

/**
 * What a machine waits on: its active workflow's batch while the workflow is held for it, read through the quorum
 * port (see {@link awaitingOf}); null otherwise.
 */
export async function machineAwaiting(
  sql: SqlExecutor,
  quorum: QuorumPort | undefined,
  workflow: MachineWorkflowView | null,
): Promise<MachineAwaiting | null> {
  if (!workflow?.held || workflow.batchId === null) return null;
  return awaitingOf(sql, quorum, workflow.batchId);
}

/** The list form of a machine. */
export function toSummary(
  machine: MachineRecord,
  workflow: MachineWorkflowView | null,
  awaiting: MachineAwaiting | null = null,
): MachineSummary {
  return {
    nodeId: machine.nodeId,
    tenantId: machine.tenantId,
    siteId: machine.siteId,
    name: machine.name,
    pool: machine.pool,
    state: machine.state,
    held: machine.held,
    labels: machine.labels,
    workflowId: workflow?.id ?? null,
    stepId: workflow?.step?.stepId ?? null,
    lastError: machine.lastError,
    awaiting,
    createdAt: iso(machine.createdAt) as string,
    updatedAt: iso(machine.updatedAt) as string,
  };
}

/**
 * Reads what `metal.get` shows beyond the machine's row: its MACs and its active workflow with the step in flight,
 * from provision's workflow tables (whoever started it), and the batch it waits on through `quorum` (ctx.quorum).
 */
export async function machineView(sql: SqlExecutor, machine: MachineRecord, quorum?: QuorumPort): Promise<MachineView> {
  const [macs, active] = [
    await sql.query<{ mac: string }>('SELECT mac FROM metal_macs WHERE node_id = $1 ORDER BY mac', [machine.nodeId]),
    await sql.query<Row>(`SELECT aw.* FROM (SELECT $1::text AS node_id) m ${ACTIVE_WORKFLOW_LATERAL('$2')}`, [
      machine.nodeId,
      ACTIVE_STATES_PARAM,
    ]),
  ];
  const workflow = active.rows[0] ? workflowOf(active.rows[0]) : null;
  const {
    workflowId: _w,
    stepId: _s,
    ...summary
  } = toSummary(machine, null, await machineAwaiting(sql, quorum, workflow));
  const request = machine.deployRequest;
  return {
    ...summary,
    phase: machine.phase,
    enrolling: machine.enrolling,
    holdAfter: machine.holdAfter,
    facts: machine.facts,
    bmc: { address: machine.bmcAddress, driver: machine.bmcDriver, hasCredential: machine.bmcCredentialRef !== null },
    macs: macs.rows.map((r) => r.mac),
    workflow,
    deploy: request
      ? {
          profileId: request.profileId,
          profileVersion: request.profileVersion ?? null,
          image: request.image ?? null,
          userData: request.userDataRef !== undefined,
        }
      : null,
  };
}
