import type { ControlPlaneStepDefinition, StepPreloadRefs } from '../define/types';
import type { StepRegistry } from './step-registry';

/** What a step's preload read with its workflow: for which attempt, and the value. */
export interface StepPreloaded {
  readonly attempt: number;
  readonly value: unknown;
}

const literal = (text: string) => `'${text.replaceAll("'", "''")}'`;

function preloadingSteps(steps: StepRegistry): [string, ControlPlaneStepDefinition][] {
  const found: [string, ControlPlaneStepDefinition][] = [];
  for (const [id, step] of steps) {
    if (step.runsOn === 'control-plane' && step.preload) found.push([id, step]);
  }
  return found;
}

const built = new WeakMap<StepRegistry, Map<string, string>>();

/**
 * The `step_preloads` column of a workflow read (`w` the workflow row): for the control-plane step in flight and the
 * first pending one, if their step carries a `preload`, `{ <stepId>: { attempt, value } }` (NULL when none); an empty
 * string when no registered step preloads. `now` is the SQL expression of the engine's time.
 *
 * @example
 * ```ts
 * const column = stepPreloadsColumn(steps, '$2::timestamptz'); // ", (SELECT json_object_agg(…)) AS step_preloads"
 * ```
 */
export function stepPreloadsColumn(steps: StepRegistry | undefined, now: string): string {
  if (!steps) return '';
  let byNow = built.get(steps);
  if (!byNow) {
    byNow = new Map();
    built.set(steps, byNow);
  }
  const cached = byNow.get(now);
  if (cached !== undefined) return cached;
  const preloading = preloadingSteps(steps);
  let column = '';
  if (preloading.length > 0) {
    // The refs name columns of one derived table with an alias of its own, so a preload's SQL may use any alias
    // (w, s, m, …) without capturing them.
    const refs: StepPreloadRefs = {
      workflowId: 'preload_step.workflow_id',
      nodeId: 'preload_step.node_id',
      stepKey: 'preload_step.step_key',
      now,
    };
    const branches = preloading.map(
      ([id, step]) => `WHEN ${literal(id)} THEN to_json(${step.preload?.sql(refs) ?? 'NULL'})`,
    );
    column = `, (SELECT json_object_agg(preload_step.step_id, json_build_object('attempt', preload_step.attempt,
        'value', CASE preload_step.action ${branches.join(' ')} END))
      FROM (SELECT ps.step_id, ps.action, ps.attempt, w.id AS workflow_id, w.node_id,
          'wf:' || w.id || ':' || ps.step_id || '#' || ps.attempt AS step_key
        FROM workflow_steps ps
        WHERE ps.workflow_id = w.id AND ps.runs_on = 'control-plane' AND ps.resolution = 'step'
          AND ps.action IN (${preloading.map(([id]) => literal(id)).join(', ')})
          AND (ps.state = 'running' OR ps.position = (SELECT min(pp.position) FROM workflow_steps pp
            WHERE pp.workflow_id = w.id AND pp.state = 'pending'))) preload_step) AS step_preloads`;
  }
  byNow.set(now, column);
  return column;
}

/**
 * The `step_preloads` column as read (JSON), by step id; undefined when it holds nothing usable.
 *
 * @example
 * ```ts
 * const preloads = parseStepPreloads(row.step_preloads);
 * ```
 */
export function parseStepPreloads(value: unknown): ReadonlyMap<string, StepPreloaded> | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const found = new Map<string, StepPreloaded>();
  for (const [stepId, entry] of Object.entries(value as Record<string, unknown>)) {
    const { attempt, value: preloaded } = (entry ?? {}) as { attempt?: unknown; value?: unknown };
    if (typeof attempt === 'number' && preloaded !== undefined) found.set(stepId, { attempt, value: preloaded });
  }
  return found.size > 0 ? found : undefined;
}
