import type { Labels } from '@better-compute/core';
import type { StagedWrite } from '@better-compute/core/kernel';
import type { LoadedWorkflow } from './workflow-rows';

/**
 * What a settled run's writes with its result leave for the transitions after them, when every one of them says
 * (`StagedWrite.leaves`): the pass plans on through them, and the statement that writes them starts what follows.
 * Undefined when one does not: the pass writes them first, and reads the workflow again before a decision that needs
 * a read or the node's labels.
 *
 * @example
 * ```ts
 * const foreseen = foreseenWrites(run.outcome.with ?? []);
 * if (foreseen?.nodeLabels) state = withNodeLabels(state, foreseen.nodeLabels);
 * ```
 */
export function foreseenWrites(writes: readonly StagedWrite[]): { nodeLabels?: Labels } | undefined {
  let nodeLabels: Labels | undefined;
  for (const write of writes) {
    if (!write.leaves) return undefined;
    nodeLabels = write.leaves.nodeLabels ?? nodeLabels;
  }
  return nodeLabels ? { nodeLabels } : {};
}

/**
 * Whether a step's run may start before these writes commit, on what the claim read for it: only when every write
 * says it leaves those reads as they were (`leaves` without `runReads: 'changed'`).
 *
 * @example
 * ```ts
 * if (plan.with && !runReadsKept(plan.with)) reads = undefined;
 * ```
 */
export function runReadsKept(writes: readonly StagedWrite[]): boolean {
  return writes.every((write) => write.leaves !== undefined && write.leaves.runReads === undefined);
}

/**
 * `state` with its node's labels as a write with a run's result leaves them.
 *
 * @example
 * ```ts
 * state = withNodeLabels(state, { 'gpu.count': '8' });
 * ```
 */
export function withNodeLabels(state: LoadedWorkflow, labels: Labels): LoadedWorkflow {
  const { node } = state.workflow;
  return node ? { ...state, workflow: { ...state.workflow, node: { ...node, labels } } } : state;
}
