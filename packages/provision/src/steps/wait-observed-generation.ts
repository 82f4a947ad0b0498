import { ComputeError, manifest } from '@better-compute/core';
import { getNode } from '@better-compute/core/nodes';
import { defineStep } from '../define/define-step';
import { stepNotReady } from '../engine/step-not-ready';
import { requireStepNode } from './wait-agent-joined';

/**
 * `wait.observedGeneration`: waits until the node's agent reports it applied its current spec
 * (`observed_generation >= generation`), then succeeds with `{ generation, observedGeneration }`; until then throws
 * `stepNotReady(5_000)`, and at its deadline (30 minutes unless the profile step sets `timeout`) fails TIMEOUT.
 *
 * @example
 * ```ts
 * const steps = [{ use: 'wait.observedGeneration', timeout: '1h' }];
 * ```
 */
export const waitObservedGeneration = defineStep({
  id: 'wait.observedGeneration',
  runsOn: 'control-plane',
  timeout: '30m',
  retrySafe: true,
  input: manifest({}),
  description: "Waits until the node's observed generation reaches its generation.",
  async run(_input, ctx) {
    const node = requireStepNode(ctx, 'wait.observedGeneration');
    const row = await getNode(ctx.sql, node.id);
    if (!row) throw new ComputeError('NOT_FOUND', `node ${node.id} not found`, { details: { path: ['nodeId'] } });
    const { generation, observedGeneration } = row;
    if (observedGeneration < generation) throw stepNotReady(5_000);
    return { generation, observedGeneration };
  },
});
