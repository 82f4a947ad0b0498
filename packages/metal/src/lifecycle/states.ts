/**
 * A machine's provision state (DESIGN.md "What metal ships"): `enrolling → inspecting → commissioning → available →
 * deploying → deployed → releasing → available`, `retiring → retired`, `adopting → deployed`, and `failed` from any
 * workflow-driven state.
 *
 * @example
 * ```ts
 * const state: NodeState = 'available';
 * ```
 */
export type NodeState =
  | 'enrolling'
  | 'inspecting'
  | 'commissioning'
  | 'available'
  | 'deploying'
  | 'deployed'
  | 'releasing'
  | 'retiring'
  | 'retired'
  | 'adopting'
  | 'failed';

/**
 * The states in which a workflow of metal's runs on the node, and the profile each starts (`owner: 'metal'`).
 *
 * @example
 * ```ts
 * PHASE_PROFILES.deploying; // undefined: a deploy names its own profile
 * PHASE_PROFILES.releasing; // 'metal.release'
 * ```
 */
export const PHASE_PROFILES = Object.freeze({
  enrolling: 'metal.enroll',
  inspecting: 'metal.inspect',
  commissioning: 'metal.commission',
  deploying: undefined,
  releasing: 'metal.release',
  retiring: 'metal.retire',
  adopting: 'metal.adopt',
} as const);

/** A state in which a workflow of metal's runs on the node. */
export type PhaseState = keyof typeof PHASE_PROFILES;

/** The states a machine rests in: no workflow of metal's runs. */
export type RestingState = Exclude<NodeState, PhaseState>;

/**
 * Every provision state, in lifecycle order.
 *
 * @example
 * ```ts
 * NODE_STATES.includes('retired'); // true
 * ```
 */
export const NODE_STATES: readonly NodeState[] = Object.freeze([
  'enrolling',
  'inspecting',
  'commissioning',
  'available',
  'deploying',
  'deployed',
  'releasing',
  'retiring',
  'retired',
  'adopting',
  'failed',
]);

/**
 * Whether a workflow of metal's runs in `state` (it moves on when that workflow ends).
 *
 * @example
 * ```ts
 * isPhaseState('inspecting'); // true
 * isPhaseState('available'); // false
 * ```
 */
export function isPhaseState(state: NodeState): state is PhaseState {
  return Object.hasOwn(PHASE_PROFILES, state);
}
