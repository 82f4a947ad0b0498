import type { SqlExecutor } from '@better-compute/core';
import { joinNodeSql, nodeColumnSql } from '@better-compute/core/nodes';
import type { HoldPoint, LifecycleSnapshot } from '../lifecycle/decide';
import { isPhaseState, type NodeState, type PhaseState } from '../lifecycle/states';

/**
 * What metal keeps of a failed phase: the workflow's error (or the abort that ended it), with the workflow and phase.
 *
 * @example
 * ```ts
 * const error: MachineError = { code: 'TIMEOUT', message: 'main.2 (wait.agentJoined): …', stepId: 'main.2', workflowId, phase: 'deploying' };
 * ```
 */
export interface MachineError {
  /** The workflow's error code; `ABORTED` for `metal.abort`, `CANCELLED` for a workflow cancelled some other way. */
  code: string;
  message: string;
  stepId?: string;
  workflowId: string | null;
  phase: PhaseState | null;
}

/**
 * What a deploy asked for, kept on the machine until it is released: the profile (and version), an image
 * (`deploy.deploy` deploys it over the profile's), and user data stored through `ctx.secrets` (only its reference is
 * kept; `deploy.deploy` sends it over the profile's rendered user data).
 *
 * @example
 * ```ts
 * const request: DeployRequest = { profileId: 'ubuntu-24.04-autoinstall', profileVersion: 1, image: 'ubuntu@24.04' };
 * ```
 */
export interface DeployRequest {
  profileId: string;
  profileVersion?: number;
  image?: string;
  userDataRef?: string;
}

/** A machine as metal reads it: its `metal_machines` row with its node's state, name, labels and facts. */
export interface MachineRecord {
  nodeId: string;
  tenantId: string;
  siteId: string;
  pool: string | null;
  name: string | null;
  /** The node's provision state (null only for a node metal does not manage). */
  state: NodeState;
  phase: PhaseState | null;
  enrolling: boolean;
  holdAfter: HoldPoint | null;
  held: boolean;
  workflowId: string | null;
  lastError: MachineError | null;
  deployRequest: DeployRequest | null;
  bmcAddress: string;
  bmcDriver: string;
  bmcCredentialRef: string | null;
  labels: Record<string, string>;
  facts: Record<string, unknown>;
  createdAt: Date;
  updatedAt: Date;
}

type Row = Record<string, unknown>;

/** The select list of a machine, `m` the `metal_machines` row and `n` its node. */
export const MACHINE_COLUMNS = `m.node_id, m.tenant_id, m.site_id, m.pool, m.phase, m.enrolling, m.hold_after, m.held,
  m.workflow_id, m.last_error, m.deploy_request, m.bmc_address, m.bmc_driver, m.bmc_credential_ref, m.created_at,
  m.updated_at, ${nodeColumnSql('provisionState', 'n')} AS provision_state, ${nodeColumnSql('name', 'n')} AS name,
  ${nodeColumnSql('labels', 'n')} AS labels, ${nodeColumnSql('facts', 'n')} AS facts`;

/** `FROM metal_machines m` with its node as `n`. */
export const MACHINE_FROM = `metal_machines m ${joinNodeSql('n', 'm.node_id')}`;

function asDate(value: unknown): Date {
  return value instanceof Date ? value : new Date(String(value));
}

/** A stored `phase`, or null when it is none (or not a phase state). */
export function phaseOf(value: unknown): PhaseState | null {
  return typeof value === 'string' && isPhaseState(value as NodeState) ? (value as PhaseState) : null;
}

/** A stored `hold_after`, or null when it is none. */
export function holdPointOf(value: unknown): HoldPoint | null {
  return value === 'enrolling' || value === 'inspecting' ? value : null;
}

/** Maps a row of {@link MACHINE_COLUMNS}. */
export function toMachineRecord(r: Row): MachineRecord {
  return {
    nodeId: r.node_id as string,
    tenantId: r.tenant_id as string,
    siteId: r.site_id as string,
    pool: (r.pool as string | null) ?? null,
    name: (r.name as string | null) ?? null,
    state: r.provision_state as NodeState,
    phase: phaseOf(r.phase),
    enrolling: r.enrolling === true,
    holdAfter: holdPointOf(r.hold_after),
    held: r.held === true,
    workflowId: (r.workflow_id as string | null) ?? null,
    lastError: (r.last_error as MachineError | null) ?? null,
    deployRequest: (r.deploy_request as DeployRequest | null) ?? null,
    bmcAddress: r.bmc_address as string,
    bmcDriver: r.bmc_driver as string,
    bmcCredentialRef: (r.bmc_credential_ref as string | null) ?? null,
    labels: (r.labels as Record<string, string> | null) ?? {},
    facts: (r.facts as Record<string, unknown> | null) ?? {},
    createdAt: asDate(r.created_at),
    updatedAt: asDate(r.updated_at),
  };
}

/**
 * Reads a machine (within `tenantId` when given: another tenant's machine reads as missing). With `forUpdate` its
 * `metal_machines` row stays locked until the caller's transaction ends: every move of a machine takes that lock
 * first, so an operator's request and the reconciler never decide on the same machine at once.
 *
 * @example
 * ```ts
 * const machine = await readMachine(tx, nodeId, { tenantId: 'acme', forUpdate: true });
 * ```
 */
export async function readMachine(
  sql: SqlExecutor,
  nodeId: string,
  options: { tenantId?: string; forUpdate?: boolean } = {},
): Promise<MachineRecord | undefined> {
  const params: unknown[] = [nodeId];
  let where = 'm.node_id = $1';
  if (options.tenantId !== undefined) {
    params.push(options.tenantId);
    where += ' AND m.tenant_id = $2';
  }
  if (options.forUpdate === true) {
    // The lock first, in a statement of its own: a read that waited for the lock and read the join in the same
    // statement would see the machine's row as committed but its node's (its provision_state) as of before the wait.
    // Under READ COMMITTED the next statement reads both as they are now.
    const locked = await sql.query(`SELECT 1 FROM metal_machines m WHERE ${where} FOR UPDATE`, params);
    if (locked.rowCount === 0) return undefined;
  }
  const { rows } = await sql.query<Row>(`SELECT ${MACHINE_COLUMNS} FROM ${MACHINE_FROM} WHERE ${where}`, params);
  return rows[0] ? toMachineRecord(rows[0]) : undefined;
}

/**
 * The snapshot the lifecycle decides on.
 *
 * @example
 * ```ts
 * const move = decideRequest(snapshotOf(machine), 'deploy');
 * ```
 */
export function snapshotOf(
  machine: Pick<MachineRecord, 'state' | 'enrolling' | 'phase' | 'holdAfter' | 'held'>,
): LifecycleSnapshot {
  return {
    state: machine.state,
    enrolling: machine.enrolling,
    ...(machine.state === 'failed' && machine.phase !== null ? { failedFrom: machine.phase } : {}),
    ...(machine.holdAfter !== null ? { holdAfter: machine.holdAfter } : {}),
    held: machine.held,
  };
}
