/**
 * The engine's defaults, as the reference pages name them.
 *
 * @example
 * ```ts
 * ENGINE_DEFAULTS.workflowPollMs; // 10_000
 * ```
 */
export const ENGINE_DEFAULTS = Object.freeze({
  /** How long `stepNotReady()` waits when given no delay. */
  stepNotReadyMs: 5_000,
  /** How often a relaying step's `awaitCommand` looks at its command again. */
  commandStepPollMs: 2_000,
  /** How often a waiting agent step is looked at again. */
  workflowPollMs: 10_000,
  /** A driver operation's timeout. */
  driverOperationTimeoutMs: 10 * 60_000,
  /** `awaitCommand`'s default `timeoutMs`. */
  awaitCommandTimeoutMs: 10 * 60_000,
});

/**
 * The work kind of the `workflow` reconciler, keyed by node id (or workflow id for workflows without a node).
 *
 * @example
 * ```ts
 * await ctx.work.enqueue(tx, { kind: WORKFLOW_WORK_KIND, key: nodeId });
 * ```
 */
export const WORKFLOW_WORK_KIND = 'workflow';

/**
 * Workflow states. `failed` is not terminal: `retryWorkflow` runs it again.
 *
 * @example
 * ```ts
 * const state: WorkflowState = 'failing';
 * ```
 */
export type WorkflowState =
  | 'pending'
  | 'running'
  | 'paused'
  | 'failing'
  | 'cancelling'
  | 'succeeded'
  | 'failed'
  | 'cancelled';

/**
 * The states in which a workflow is active: a node (or instance) has at most one workflow in them.
 *
 * @example
 * ```ts
 * ACTIVE_WORKFLOW_STATES.includes('paused'); // true
 * ```
 */
export const ACTIVE_WORKFLOW_STATES: readonly WorkflowState[] = Object.freeze([
  'pending',
  'running',
  'paused',
  'failing',
  'cancelling',
]);

/** The active states as a SQL list, for `state IN (…)`. */
export const ACTIVE_STATES_SQL = `(${ACTIVE_WORKFLOW_STATES.map((s) => `'${s}'`).join(', ')})`;

/**
 * Step states: `pending → running → waiting → succeeded | failed`, also `skipped` and `cancelled`.
 *
 * @example
 * ```ts
 * const state: StepState = 'waiting';
 * ```
 */
export type StepState = 'pending' | 'running' | 'waiting' | 'succeeded' | 'failed' | 'skipped' | 'cancelled';

/** The phase a step row belongs to. */
export type StepPhase = 'main' | 'on-failure' | 'cleanup';
