import { ComputeError, manifest } from '@better-compute/core';
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
    const { rows } = await ctx.sql.query<{ generation: number | string; observed_generation: number | string }>(
      'SELECT generation, observed_generation FROM nodes WHERE id = $1',
      [node.id],
    );
    const row = rows[0];
    if (!row) throw new ComputeError('NOT_FOUND', `node ${node.id} not found`, { details: { path: ['nodeId'] } });
    const generation = Number(row.generation);
    const observedGeneration = Number(row.observed_generation);
    if (observedGeneration < generation) throw stepNotReady(5_000);
    return { generation, observedGeneration };
  },
});
