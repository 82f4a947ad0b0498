import type { Json, Reconciler } from 'better-compute/core';
import type { EngineLab } from '../support/engine-lab';

// For tests that call the workflow reconciler directly, as a worker's pass would, with a context of their choosing.

/** The provision module's `workflow` reconciler (with its preload). */
export function workflowReconciler(lab: EngineLab): Reconciler {
  const reconciler = lab.provision.reconcilers?.workflow;
  if (!reconciler?.preload) throw new Error('the workflow reconciler has no preload');
  return reconciler;
}

/**
 * Starts a workflow of two `lab.ping` steps, runs the pass that sends the first command, and has the node's agent
 * answer it with `result`; the engine has not looked at the answer yet. Returns the workflow id.
 */
export async function firstOfTwoAnswered(lab: EngineLab, profileId: string, result?: Json): Promise<string> {
  lab.nodeAgent.respond({ outcome: 'ignore' });
  const id = await lab.start({ id: profileId, steps: [{ use: 'lab.ping' }, { use: 'lab.ping' }] });
  await lab.compute.runDueWork();
  lab.nodeAgent.respond({ outcome: 'succeed', ...(result === undefined ? {} : { result }) });
  await lab.nodeAgent.poll();
  return id;
}
