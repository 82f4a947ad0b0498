import { ComputeError, type ModuleContext, type SqlExecutor } from '@better-compute/core';
import { type CommitChangeInput, commit } from '@better-compute/core/kernel';
import type { LifecycleMove } from '../lifecycle/decide';
import { isPhaseState, type PhaseState } from '../lifecycle/states';
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
  const deployRequest = extras.deployRequest ?? machine.deployRequest;
  let workflowId: string | null = null;
  // The workflow first: a start it refuses (a profile that does not resolve, another active workflow) has written
  // nothing yet, so the caller can fail the machine in the same transaction without a savepoint.
  if (move.startsWorkflow && isPhaseState(move.to)) {
    const workflows = requireWorkflows(ctx);
    let profile: { profileId: string; profileVersion?: number };
    if (move.to === 'deploying') {
      if (!deployRequest) {
        throw new ComputeError('INVALID_STATE', `machine ${machine.nodeId} has no deploy request to run`, {
          details: { reason: 'illegal-move', state: move.to, verb: 'deploy' },
        });
      }
      profile = {
        profileId: deployRequest.profileId,
        ...(deployRequest.profileVersion === undefined ? {} : { profileVersion: deployRequest.profileVersion }),
      };
    } else {
      profile = { profileId: profiles[move.to] };
    }
    // With approvers configured, the workflow's destructive kinds become its batch and it waits for the approvals.
    const batch = batchFor(tx, ctx, machine);
    ({ id: workflowId } = await workflows.start(tx, {
      tenantId: machine.tenantId,
      nodeId: machine.nodeId,
      owner: 'metal',
      ...profile,
      ...(batch ? { batchFor: batch } : {}),
    }));
  }
  const phase = move.to === 'failed' ? (move.failedFrom ?? null) : isPhaseState(move.to) ? move.to : null;
  // A deploy request lives until the machine is available again (a failed deploy's recover runs it again).
  const keptRequest = move.to === 'available' || move.to === 'retired' ? null : deployRequest;
  const retired = move.to === 'retired';
  // The node's provision state, metal's columns and the event in one statement.
  const written = await commit(
    { ...ctx, sql: tx },
    {
      changes: [
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
        },
        // A retired machine's MACs and BMC address may be enrolled again (the same hardware, or a NIC moved to
        // another machine): its MACs go, and retired_at takes it out of the site's unique BMC addresses.
        ...(retired
          ? [
              {
                name: 'retired_macs',
                sql: ({ bind, guard }: CommitChangeInput) =>
                  `DELETE FROM metal_macs WHERE node_id = ${bind(machine.nodeId)} AND ${guard}`,
              },
            ]
          : []),
      ],
      events: [
        {
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
        },
      ],
    },
    tx,
  );
  if (written.status !== 'committed') {
    throw new ComputeError('NOT_FOUND', `node ${machine.nodeId} not found`, { details: { path: ['nodeId'] } });
  }
  const forgotten = keptRequest === null ? deployRequest?.userDataRef : undefined;
  return { workflowId, ...(forgotten ? { forgottenUserDataRef: forgotten } : {}) };
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
  const remove = ctx.secrets?.delete?.bind(ctx.secrets);
  if (!ref || !remove) return;
  try {
    await remove(ref);
  } catch (error) {
    ctx.log.warn("metal could not delete a released deploy request's user data secret", {
      secretRef: ref,
      errorName: error instanceof Error ? error.name : typeof error,
    });
  }
}
