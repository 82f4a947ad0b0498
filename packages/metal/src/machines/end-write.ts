import type { ModuleContext } from '@better-compute/core';
import type { WorkflowEnd, WorkflowEndWrite } from '@better-compute/provision';
import type { NodeState } from '../lifecycle/states';
import { METAL_MACHINE_PRELOAD_ID, type PreloadedLifecycle } from '../steps/machine-preload';
import { forgetUserData, type PhaseProfiles } from './apply-move';
import { type DeployRequest, holdPointOf, phaseOf } from './machine-rows';
import { METAL_WORK_KIND } from './reconciler';
import { type EndingMachine, stageSucceededMove } from './staged-move';

/** The machine as the claim's metal preload read it, while the workflow that ends is still its workflow. */
function endingMachine(end: WorkflowEnd): { machine: EndingMachine; version: string } | undefined {
  const read = end.reads[METAL_MACHINE_PRELOAD_ID];
  if (typeof read !== 'object' || read === null || Array.isArray(read)) return undefined;
  const { nodeId, tenantId, lifecycle } = read as { nodeId?: unknown; tenantId?: unknown; lifecycle?: unknown };
  if (
    end.nodeId === null ||
    nodeId !== end.nodeId ||
    typeof tenantId !== 'string' ||
    typeof lifecycle !== 'object' ||
    lifecycle === null
  ) {
    return undefined;
  }
  const l = lifecycle as Partial<PreloadedLifecycle>;
  if (l.workflowId !== end.workflowId || typeof l.version !== 'string' || typeof l.state !== 'string') return undefined;
  const machine: EndingMachine = {
    nodeId: end.nodeId,
    tenantId,
    state: l.state as NodeState,
    phase: phaseOf(l.phase),
    enrolling: l.enrolling === true,
    holdAfter: holdPointOf(l.holdAfter),
    held: l.held === true,
    workflowId: end.workflowId,
    deployRequest: (l.deployRequest as DeployRequest | null | undefined) ?? null,
  };
  return { machine, version: l.version };
}

/**
 * metal's end write (provision's `WorkflowEndWrite` for owner `metal`): a succeeded phase workflow's move (the next
 * state, and the next phase's workflow started) written by the statement that ends the workflow, decided on the
 * machine as the claim read it (its metal preload) and required to be unchanged since. A failed or cancelled
 * workflow, a machine the preload did not read or whose workflow is another, the quorum's approvers or a start that
 * cannot be staged are left to the `metal` reconciler, queued as before; so is the end when the machine changed
 * since the claim (the statement finds it stale and the engine ends the workflow again without this write).
 *
 * @example
 * ```ts
 * const module = { id: 'metal', extensions: [...metalExtensions, metalEndWrite(profiles)] };
 * ```
 */
export function metalEndWrite(profiles: PhaseProfiles): WorkflowEndWrite {
  return Object.freeze({
    extension: 'workflow-end-write' as const,
    id: METAL_WORK_KIND,
    owner: METAL_WORK_KIND,
    async stage(end: WorkflowEnd, ctx: ModuleContext) {
      if (end.outcome !== 'succeeded') return undefined;
      const ending = endingMachine(end);
      if (!ending) return undefined;
      const staged = await stageSucceededMove(ctx, profiles, ending.machine, ending.version);
      if (!staged) return undefined;
      const { forgotten } = staged;
      return {
        changes: staged.changes,
        events: staged.events,
        ...(staged.wake ? { wake: staged.wake } : {}),
        // The engine may start the next phase's workflow in this statement too: its ramdisk's first commands with it.
        ...(staged.start ? { next: staged.start } : {}),
        ...(forgotten ? { afterCommit: () => forgetUserData(ctx, forgotten) } : {}),
      };
    },
  });
}
