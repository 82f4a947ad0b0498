import {
  ComputeError,
  type Json,
  type ModuleContext,
  type NewEvent,
  type StagedStart,
  type WorkRequest,
} from '@better-compute/core';
import type { CommitChange } from '@better-compute/core/kernel';

/**
 * How a workflow ended, as its owner's end write is told (see {@link WorkflowEndWrite}).
 *
 * @example
 * ```ts
 * const stage = async (end: WorkflowEnd) => (end.outcome === 'succeeded' ? writeOf(end.workflowId) : undefined);
 * ```
 */
export interface WorkflowEnd {
  readonly workflowId: string;
  /** The workflow's key: its node id, or its own id for a workflow without a node. */
  readonly key: string;
  readonly tenantId: string;
  readonly nodeId: string | null;
  readonly outcome: 'succeeded' | 'failed' | 'cancelled';
  /** The workflow's error (a failed workflow's), as `workflows.get` shows it. */
  readonly error: { readonly code: string; readonly message: string; readonly stepId?: string } | null;
  readonly cancelReason: string | null;
  /**
   * What the worker's claim read for the workflow (the modules' workflow preloads, by id), while every change since
   * was the pass's own: `{}` when the pass read the workflow again. A write decided on it guards itself (`requires`).
   */
  readonly reads: Readonly<Record<string, Json>>;
  readonly now: Date;
}

/**
 * What an owner writes with the statement that ends its workflow: its changes (each `requires` holds the whole
 * statement: when one fails, nothing is written and the engine ends the workflow again without the end write,
 * queuing the owner), events after the workflow's own, and a work item to queue instead of the owner's (a workflow
 * the write starts). `afterCommit` runs once the statement has committed (best effort: what it does must be safe to
 * lose to a crash). A write may start the key's next workflow (`ctx.workflows.stageStart`, its changes and wake): the
 * start's insert is guarded on the statement's gate, the update that ends the workflow, which therefore runs first,
 * and the node's one-active-workflow index sees the old one ended.
 *
 * @example
 * ```ts
 * const staged = await ctx.workflows!.stageStart!(ctx.sql, { tenantId, profileId: 'acme.next', nodeId, owner: 'acme' });
 * const write: StagedEndWrite = { changes: staged!.changes, events: staged!.events, wake: staged!.wake };
 * ```
 */
export interface StagedEndWrite {
  readonly changes: readonly CommitChange[];
  readonly events?: readonly NewEvent[];
  readonly wake?: WorkRequest;
  /**
   * The key's next workflow, when this write starts it: `ctx.workflows.stageStart`'s result as it came, its changes,
   * events and wake among this write's. The engine may then take that workflow's first transitions in the same pass
   * and write them with this statement (a first step that relays commands: its start and its sends), instead of
   * leaving them to the workflow's own claim; it does when every workflow preload the claim read says what it would
   * read for that workflow (`WorkflowPreload.following`). Without it, or when it cannot, the start is written as staged.
   */
  readonly next?: StagedStart;
  afterCommit?(): Promise<void>;
}

/**
 * A workflow owner's reaction to the end of one of its workflows, written by the statement that ends it instead of by
 * the owner's reconciler in passes of its own (a module extension of kind `workflow-end-write`, one per owner). The
 * engine calls `stage` when a pass's plan ends a workflow whose `owner` is this write's, on the one-statement path;
 * `stage` must not write (it may read, though each read costs what the end write saves) and returns the owner's
 * writes, or undefined to have the owner queued as usual (a case it leaves to its reconciler: a failure, a quorum, a
 * read it lacks). The owner's reconciler stays the fallback: it must still decide every end on its own, and find an
 * end its write already carried out as done.
 *
 * @example
 * ```ts
 * const endWrite: WorkflowEndWrite = {
 *   extension: 'workflow-end-write',
 *   id: 'acme',
 *   owner: 'acme',
 *   stage: async (end) => end.outcome !== 'succeeded' ? undefined : {
 *     changes: [{ name: 'acme_done', sql: ({ bind, guard }) =>
 *       `UPDATE acme_jobs SET done = true WHERE workflow_id = ${bind(end.workflowId)} AND ${guard}` }],
 *   },
 * };
 * ```
 */
export interface WorkflowEndWrite {
  readonly extension: 'workflow-end-write';
  /** The extension's id, unique among end writes (the owner's name will do). */
  readonly id: string;
  /** The owner (a work kind, as `ctx.workflows.start` names it) whose workflows' ends this writes. */
  readonly owner: string;
  stage(end: WorkflowEnd, ctx: ModuleContext): Promise<StagedEndWrite | undefined>;
}

/**
 * The workflow end writes among modules' extensions, by owner. One without an owner or a `stage` function, or a
 * second one for the same owner, is INVALID_CONFIG at its path (`['modules', m, 'extensions', e]`).
 *
 * @example
 * ```ts
 * const endWrites = workflowEndWritesOf([metal()]); // Map { 'metal' => … }
 * ```
 */
export function workflowEndWritesOf(
  modules: readonly { readonly extensions?: readonly unknown[] }[],
): ReadonlyMap<string, WorkflowEndWrite> {
  const byOwner = new Map<string, WorkflowEndWrite>();
  modules.forEach((module, m) => {
    (module.extensions ?? []).forEach((extension, e) => {
      const candidate = extension as Partial<WorkflowEndWrite> | null;
      if (candidate?.extension !== 'workflow-end-write') return;
      const path = ['modules', m, 'extensions', e];
      const { owner } = candidate;
      if (typeof owner !== 'string' || owner.length === 0 || owner.length > 512) {
        throw new ComputeError('INVALID_CONFIG', 'a workflow end write must name its owner (a work kind)', {
          details: { path: [...path, 'owner'] },
        });
      }
      if (typeof candidate.stage !== 'function') {
        throw new ComputeError('INVALID_CONFIG', `workflow end write of ${owner}: stage must be a function`, {
          details: { path: [...path, 'stage'] },
        });
      }
      if (byOwner.has(owner)) {
        throw new ComputeError('INVALID_CONFIG', `a workflow end write for owner ${owner} is registered twice`, {
          details: { path: [...path, 'owner'] },
        });
      }
      byOwner.set(owner, candidate as WorkflowEndWrite);
    });
  });
  return byOwner;
}
