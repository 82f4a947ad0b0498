import type { Json, Labels } from '@better-compute/core';
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
 * What the claim read for step runs (`reads`), as a run's writes with its result leave it: each write's `runReads`
 * applied in order; undefined when a write cannot say (`runReads: 'changed'`, or no `leaves`): a run started after
 * them then reads for itself, and its first statement writes them before it (see `RunGate`).
 *
 * @example
 * ```ts
 * const after = runReadsAfter(claimed.stepReads.reads, plan.with ?? []);
 * ```
 */
export function runReadsAfter(
  reads: Readonly<Record<string, Json>>,
  writes: readonly StagedWrite[],
): Record<string, Json> | undefined {
  let current: Record<string, Json> = { ...reads };
  for (const write of writes) {
    const change = write.leaves?.runReads;
    if (!write.leaves || change === 'changed') return undefined;
    if (change) current = change(current);
  }
  return current;
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
