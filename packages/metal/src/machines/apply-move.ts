import { ComputeError, type ModuleContext, type SqlExecutor } from '@better-compute/core';
import { setNodeProvisionState } from '@better-compute/core/nodes';
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
export type MoveContext = Pick<ModuleContext, 'clock' | 'events' | 'workflows' | 'quorum' | 'commandKinds' | 'work'>;

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
 * Carries out a decided move in the caller's transaction (the machine's row locked by the decision's read): the
 * node's `provision_state` through core's node repository, a fresh workflow of the phase's profile with
 * `owner: 'metal'` when the move starts one (held for its destructive batch when approvers are configured, see
 * `batchFor`), metal's columns (phase, enrolling, hold, workflow, last error, deploy request) and the event
 * `metal.node.<state>`. Returns the workflow it started, if any. Anything that fails (a profile
 * that does not resolve, a node with an active workflow) fails the whole transaction: nothing is half-written.
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
  const node = await setNodeProvisionState(tx, machine.nodeId, move.to, now);
  if (!node) throw new ComputeError('NOT_FOUND', `node ${machine.nodeId} not found`, { details: { path: ['nodeId'] } });
  const deployRequest = extras.deployRequest ?? machine.deployRequest;
  let workflowId: string | null = null;
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
  await tx.query(
    `UPDATE metal_machines SET phase = $2, enrolling = $3, hold_after = $4, held = $5, workflow_id = $6,
       last_error = $7::jsonb, deploy_request = $8::jsonb, updated_at = $9
     WHERE node_id = $1`,
    [
      machine.nodeId,
      phase,
      move.enrolling,
      move.holdAfter ?? null,
      move.held,
      workflowId,
      move.to === 'failed' && extras.lastError ? JSON.stringify(extras.lastError) : null,
      keptRequest ? JSON.stringify(keptRequest) : null,
      now,
    ],
  );
  if (move.to === 'retired') {
    // A retired machine's MACs and BMC address may be enrolled again (the same hardware, or a NIC moved to another
    // machine): its MACs go, and retired_at takes it out of the site's unique BMC addresses.
    await tx.query('DELETE FROM metal_macs WHERE node_id = $1', [machine.nodeId]);
    await tx.query('UPDATE metal_machines SET retired_at = $2 WHERE node_id = $1', [machine.nodeId, now]);
  }
  await ctx.events.publish(tx, {
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
  });
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
