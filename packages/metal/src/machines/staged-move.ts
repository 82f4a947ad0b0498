import {
  isComputeError,
  type ModuleContext,
  type NewEvent,
  type StagedStart,
  type WorkRequest,
} from '@better-compute/core';
import type { CommitChange } from '@better-compute/core/kernel';
import { decideWorkflowEnd } from '../lifecycle/decide';
import { moveWrite, type PhaseProfiles, startOfMove } from './apply-move';
import { type MachineRecord, snapshotOf } from './machine-rows';

/** What a succeeded workflow's move is decided on and written from: the machine as a lock-free read saw it. */
export type EndingMachine = Pick<
  MachineRecord,
  'nodeId' | 'tenantId' | 'state' | 'phase' | 'enrolling' | 'holdAfter' | 'held' | 'deployRequest'
> & { workflowId: string };

/** A move staged for a statement of someone's: its changes, events, the next workflow's wake, and what it lets go. */
export interface StagedMove {
  changes: [CommitChange, ...CommitChange[]];
  events: NewEvent[];
  wake?: WorkRequest;
  /** The next phase's workflow as `ctx.workflows.stageStart` staged it (its changes, events and wake are above). */
  start?: StagedStart;
  /** The user data secret of the deploy request the move lets go, to delete once the statement committed. */
  forgotten?: string;
}

/**
 * The move a succeeded workflow decides, staged for one statement: the next phase's workflow staged
 * (`ctx.workflows.stageStart`: a shipped profile costs no read) and the move's writes and event, which require that
 * the machine's row is still at `version` (its `xmin` as the read saw it; locked by the statement). Undefined when it
 * cannot be done so: no move, the quorum's approvers (a batch to create first), a start that cannot be staged or is
 * refused (decided in a transaction, which fails the machine with the refusal where it should).
 *
 * @example
 * ```ts
 * const staged = await stageSucceededMove(ctx, profiles, machine, version);
 * if (staged) await commit(ctx, { changes: staged.changes, events: staged.events, wake: staged.wake });
 * ```
 */
export async function stageSucceededMove(
  ctx: Pick<ModuleContext, 'sql' | 'workflows' | 'quorum' | 'clock'>,
  profiles: PhaseProfiles,
  machine: EndingMachine,
  version: string,
): Promise<StagedMove | undefined> {
  if (ctx.quorum?.enabled()) return undefined;
  const move = decideWorkflowEnd(snapshotOf(machine), 'succeeded');
  if (!move) return undefined;
  let staged: StagedStart | undefined;
  try {
    const start = startOfMove(profiles, machine, move);
    if (start) {
      staged = await ctx.workflows?.stageStart?.(ctx.sql, start);
      if (!staged) return undefined;
    }
  } catch (error) {
    if (isComputeError(error)) return undefined;
    throw error;
  }
  const write = moveWrite(machine, move, {}, staged?.id ?? null, ctx.clock.now(), { version });
  return {
    changes: staged ? [...staged.changes, ...write.changes] : write.changes,
    events: [...(staged?.events ?? []), write.event],
    ...(staged ? { wake: staged.wake, start: staged } : {}),
    ...(write.forgottenUserDataRef ? { forgotten: write.forgottenUserDataRef } : {}),
  };
}
