import {
  ComputeError,
  type ModuleContext,
  type NewEvent,
  type SqlExecutor,
  type StartWorkflowInput,
} from '@better-compute/core';
import { type CommitChange, type CommitChangeInput, commit } from '@better-compute/core/kernel';
import type { LifecycleMove } from '../lifecycle/decide';
import { isPhaseState, type PhaseState } from '../lifecycle/states';
import { forgetSecretsAfterCommit } from './boot-entry-secrets';
import type { DeployRequest, MachineError } from './machine-rows';
import { batchFor } from './quorum';

/**
 * The profile each phase's workflow runs (`metal.enroll`, `metal.inspect`, …), after `metal({ profiles })`'s
 * overrides; `deploying` runs the profile its deploy request names.
 */
export type PhaseProfiles = Readonly<Record<Exclude<PhaseState, 'deploying'>, string>>;

/** What carrying out a move needs of the module context. */
export type MoveContext = Pick<
  ModuleContext,
  'sql' | 'clock' | 'commands' | 'events' | 'workflows' | 'quorum' | 'commandKinds' | 'work'
>;

/** The machine a move is carried out on, as the decision read it. */
export interface MovingMachine {
  nodeId: string;
  tenantId: string;
  deployRequest: DeployRequest | null;
}

/** What a move writes besides what the decision says. */
export interface MoveExtras {
  /** The error that failed the machine (a move to `failed`). */
  lastError?: MachineError;
  /** A new deploy request (a deploy); otherwise the machine's own is kept until it is available again. */
  deployRequest?: DeployRequest;
}

/** What {@link applyMove} did besides its writes. */
export interface MoveOutcome {
  /** The workflow the move started, if any. */
  workflowId: string | null;
  /**
   * The user data secret of the deploy request the move let go (the machine is available or retired again): the
   * caller deletes it once its transaction committed (`forgetUserData`), since the secret broker writes apart.
   */
  forgottenUserDataRef?: string;
}

/** The event type a move writes: `metal.node.<state>`, or `metal.node.held` when an enroll stops where it asked. */
export function moveEventType(move: LifecycleMove): string {
  return move.held ? 'metal.node.held' : `metal.node.${move.to}`;
}

function requireWorkflows(ctx: MoveContext) {
  if (!ctx.workflows) {
    throw new ComputeError('INVALID_CONFIG', 'metal needs ctx.workflows: install provisionModule with metal', {
      details: { path: ['workflows'] },
    });
  }
  return ctx.workflows;
}

/**
 * Carries out a decided move in the caller's transaction (the machine's row locked by the decision's read): first a
 * fresh workflow of the phase's profile with `owner: 'metal'` when the move starts one (held for its destructive
 * batch when approvers are configured, see `batchFor`), then in one statement the node's `provision_state`, metal's
 * columns (phase, enrolling, hold, workflow, last error, deploy request) and the event `metal.node.<state>`. Returns
 * the workflow it started, if any. A start that is refused (a profile that does not resolve, a node with an active
 * workflow) throws before anything of the move is written (without approvers: with them, a batch may be written
 * first, and the caller undoes it with a savepoint); anything else that fails fails the whole transaction.
 *
 * @example
 * ```ts
 * await db.transaction(async (tx) => {
 *   const machine = await readMachine(tx, nodeId, { forUpdate: true });
 *   const move = decideRequest(snapshotOf(machine!), 'release');
 *   await applyMove(tx, ctx, profiles, machine!, move);
 * });
 * ```
 */
export async function applyMove(
  tx: SqlExecutor,
  ctx: MoveContext,
  profiles: PhaseProfiles,
  machine: MovingMachine,
  move: LifecycleMove,
  extras: MoveExtras = {},
): Promise<MoveOutcome> {
  const now = ctx.clock.now();
  let workflowId: string | null = null;
  // The workflow first: a start it refuses (a profile that does not resolve, another active workflow) has written
  // nothing yet, so the caller can fail the machine in the same transaction without a savepoint.
  const start = startOfMove(profiles, machine, move, extras);
  if (start) {
    const workflows = requireWorkflows(ctx);
    // With approvers configured, the workflow's destructive kinds become its batch and it waits for the approvals.
    const batch = batchFor(tx, ctx, machine);
    ({ id: workflowId } = await workflows.start(tx, { ...start, ...(batch ? { batchFor: batch } : {}) }));
  }
  const write = moveWrite(machine, move, extras, workflowId, now);
  // The node's provision state, metal's columns and the event in one statement.
  const written = await commit({ ...ctx, sql: tx }, { changes: write.changes, events: [write.event] }, tx);
  if (written.status !== 'committed') {
    throw new ComputeError('NOT_FOUND', `node ${machine.nodeId} not found`, { details: { path: ['nodeId'] } });
  }
  return { workflowId, ...(write.forgottenUserDataRef ? { forgottenUserDataRef: write.forgottenUserDataRef } : {}) };
}

/**
 * What starting a move's workflow takes (`owner: 'metal'`, the phase's profile, or for `deploying` the deploy
 * request's), or undefined for a move that starts none. INVALID_STATE for a deploy without a request.
 *
 * @example
 * ```ts
 * const start = startOfMove(profiles, machine, move); // { tenantId, nodeId, owner: 'metal', profileId: 'metal.inspect' }
 * ```
 */
export function startOfMove(
  profiles: PhaseProfiles,
  machine: MovingMachine,
  move: LifecycleMove,
  extras: MoveExtras = {},
): StartWorkflowInput | undefined {
  if (!move.startsWorkflow || !isPhaseState(move.to)) return undefined;
  const base = { tenantId: machine.tenantId, nodeId: machine.nodeId, owner: 'metal' };
  if (move.to !== 'deploying') return { ...base, profileId: profiles[move.to] };
  const deployRequest = extras.deployRequest ?? machine.deployRequest;
  if (!deployRequest) {
    throw new ComputeError('INVALID_STATE', `machine ${machine.nodeId} has no deploy request to run`, {
      details: { reason: 'illegal-move', state: move.to, verb: 'deploy' },
    });
  }
  return {
    ...base,
    profileId: deployRequest.profileId,
    ...(deployRequest.profileVersion === undefined ? {} : { profileVersion: deployRequest.profileVersion }),
  };
}

/**
 * A move's own writes, for a commit: the node's `provision_state` (`moved_node`, returning its id: a gate), metal's
 * columns (phase, enrolling, hold, workflow, last error, deploy request; `moved_machine`), a retired machine's MACs
 * let go, and the event `metal.node.<state>`. With `version` the move requires that the machine's row is still at that
 * version (its `xmin` as text, as a lock-free read saw it) and locks it: the commit writes nothing otherwise. Also the
 * user data secret the move lets go (see {@link MoveOutcome}).
 *
 * @example
 * ```ts
 * const write = moveWrite(machine, move, {}, workflowId, now, { version });
 * await commit(ctx, { changes: write.changes, events: [write.event] });
 * ```
 */
export function moveWrite(
  machine: MovingMachine,
  move: LifecycleMove,
  extras: MoveExtras,
  workflowId: string | null,
  now: Date,
  options: { version?: string } = {},
): { changes: [CommitChange, ...CommitChange[]]; event: NewEvent; forgottenUserDataRef?: string } {
  const deployRequest = extras.deployRequest ?? machine.deployRequest;
  const phase = move.to === 'failed' ? (move.failedFrom ?? null) : isPhaseState(move.to) ? move.to : null;
  // A deploy request lives until the machine is available again (a failed deploy's recover runs it again).
  const keptRequest = move.to === 'available' || move.to === 'retired' ? null : deployRequest;
  const retired = move.to === 'retired';
  const { version } = options;
  const changes: [CommitChange, ...CommitChange[]] = [
    {
      name: 'moved_node',
      sql: ({ bind, guard }) =>
        `UPDATE nodes SET provision_state = ${bind(move.to)}, updated_at = ${bind(now)}
         WHERE id = ${bind(machine.nodeId)} AND ${guard} RETURNING id`,
    },
    {
      name: 'moved_machine',
      sql: ({ bind, guard }) =>
        `UPDATE metal_machines SET phase = ${bind(phase)}::text, enrolling = ${bind(move.enrolling)},
           hold_after = ${bind(move.holdAfter ?? null)}::text, held = ${bind(move.held)},
           workflow_id = ${bind(workflowId)}::text,
           last_error = ${bind(move.to === 'failed' && extras.lastError ? JSON.stringify(extras.lastError) : null)}::jsonb,
           deploy_request = ${bind(keptRequest ? JSON.stringify(keptRequest) : null)}::jsonb,
           updated_at = ${bind(now)}::timestamptz${retired ? `, retired_at = ${bind(now)}::timestamptz` : ''}
         WHERE node_id = ${bind(machine.nodeId)} AND ${guard}`,
      ...(version === undefined
        ? {}
        : {
            requires: ({ bind }: Pick<CommitChangeInput, 'bind'>) =>
              `EXISTS (SELECT 1 FROM metal_machines WHERE node_id = ${bind(machine.nodeId)}
                 AND xmin::text = ${bind(version)} FOR UPDATE)`,
          }),
    },
    // A retired machine's MACs and BMC address may be enrolled again (the same hardware, or a NIC moved to another
    // machine): its MACs go, and retired_at takes it out of the site's unique BMC addresses.
    ...(retired
      ? [
          {
            name: 'retired_macs',
            sql: ({ bind, guard }: CommitChangeInput) =>
              `DELETE FROM metal_macs WHERE node_id = ${bind(machine.nodeId)} AND ${guard}`,
          },
        ]
      : []),
  ];
  const event: NewEvent = {
    tenantId: machine.tenantId,
    subject: `node/${machine.nodeId}`,
    type: moveEventType(move),
    data: {
      nodeId: machine.nodeId,
      from: move.from ?? null,
      to: move.to,
      held: move.held,
      workflowId,
      ...(move.to === 'failed' && extras.lastError ? { error: { ...extras.lastError } } : {}),
    },
  };
  const forgotten = keptRequest === null ? deployRequest?.userDataRef : undefined;
  return { changes, event, ...(forgotten ? { forgottenUserDataRef: forgotten } : {}) };
}

/**
 * Deletes the user data secret of a deploy request a committed move let go, through `ctx.secrets.delete` when the
 * broker has one. Best effort: a failure is logged (by reference, never the value) and leaves the sealed secret behind,
 * as a crash between the commit and this call would.
 *
 * @example
 * ```ts
 * const outcome = await db.transaction((tx) => applyMove(tx, ctx, profiles, machine, move));
 * await forgetUserData(ctx, outcome.forgottenUserDataRef);
 * ```
 */
export async function forgetUserData(
  ctx: Pick<ModuleContext, 'secrets' | 'log'>,
  ref: string | undefined,
): Promise<void> {
  await forgetSecretsAfterCommit(ctx, ref ? [ref] : []);
}
