import { ComputeError } from '@better-compute/core';
import { isPhaseState, type NodeState, type PhaseState } from './states';

/**
 * What metal keeps of a machine to decide its next move: its state, whether the phase under way is part of an
 * enroll (which goes on through inspecting and commissioning to `available`, as MAAS does), and the phase a failed
 * node failed in.
 */
export interface LifecycleSnapshot {
  state: NodeState;
  /** The phase under way is a step of an enroll, not a phase run on its own. */
  enrolling?: boolean;
  /** The phase a `failed` node failed in, which `recover` runs again. */
  failedFrom?: PhaseState;
  /** Where the enroll under way stops (see {@link HoldPoint}). */
  holdAfter?: HoldPoint;
  /** The machine rests in its `holdAfter` state with no workflow, until `inspect` or `commission` continues it. */
  held?: boolean;
}

/**
 * Where an enroll may ask to stop: after its `enrolling` workflow (the BMC answers) or after its `inspecting` one
 * (the inventory is known), before anything is written to the machine's disks.
 */
export type HoldPoint = 'enrolling' | 'inspecting';

/** What a request brings besides its verb: an enroll's hold point. */
export interface RequestOptions {
  holdAfter?: HoldPoint;
}

/** An operator's request, as the `metal` API group names them. */
export type LifecycleVerb =
  | 'enroll'
  | 'adopt'
  | 'inspect'
  | 'commission'
  | 'deploy'
  | 'release'
  | 'retire'
  | 'abort'
  | 'recover';

/**
 * A decided move: the state to write and whether a fresh workflow of that phase starts in the same transaction, with
 * what the node keeps for its next decision.
 */
export interface LifecycleMove {
  from: NodeState | undefined;
  to: NodeState;
  startsWorkflow: boolean;
  enrolling: boolean;
  failedFrom: PhaseState | undefined;
  /** The enroll's hold point, kept for the rest of the enroll (and its recover). */
  holdAfter: HoldPoint | undefined;
  /** The machine stops here, held: `to` is the phase state it rests in, with no workflow. */
  held: boolean;
}

/** The states each request on an enrolled machine is accepted in. */
export const ACCEPTED_IN: Readonly<Record<Exclude<LifecycleVerb, 'enroll' | 'adopt'>, readonly NodeState[]>> =
  Object.freeze({
    // An inspect or commission of an available machine runs that phase again and brings it back to available.
    inspect: ['available'],
    commission: ['available'],
    deploy: ['available'],
    release: ['deployed'],
    // A deployed machine is released first (its disks wiped); a failed one may be retired as it is.
    retire: ['available', 'failed'],
    abort: ['enrolling', 'inspecting', 'commissioning', 'deploying', 'releasing', 'retiring', 'adopting'],
    recover: ['failed'],
  });

function refuse(verb: LifecycleVerb, state: NodeState | undefined, held = false): never {
  const where = state === undefined ? 'a machine that is not enrolled' : `a machine in state '${state}'`;
  throw new ComputeError('INVALID_STATE', `cannot ${verb} ${where}${held ? ' (held)' : ''}`, {
    details: { reason: 'illegal-move', state: state ?? null, verb, ...(held ? { held: true } : {}) },
  });
}

function phase(
  from: NodeState | undefined,
  to: PhaseState,
  enrolling = false,
  holdAfter: HoldPoint | undefined = undefined,
): LifecycleMove {
  return { from, to, startsWorkflow: true, enrolling, failedFrom: undefined, holdAfter, held: false };
}

function rest(from: NodeState, to: NodeState): LifecycleMove {
  return {
    from,
    to,
    startsWorkflow: false,
    enrolling: false,
    failedFrom: undefined,
    holdAfter: undefined,
    held: false,
  };
}

function hold(state: HoldPoint): LifecycleMove {
  return {
    from: state,
    to: state,
    startsWorkflow: false,
    enrolling: true,
    failedFrom: undefined,
    holdAfter: state,
    held: true,
  };
}

/** What a held machine accepts: the request that continues its enroll, a fresh inspect, or retire. */
function decideHeld(node: LifecycleSnapshot & { state: HoldPoint }, verb: LifecycleVerb): LifecycleMove | undefined {
  if (verb === 'retire') return phase(node.state, 'retiring');
  if (node.state === 'enrolling' && verb === 'inspect') return phase('enrolling', 'inspecting', true);
  if (node.state === 'inspecting' && verb === 'commission') return phase('inspecting', 'commissioning', true);
  // Inspecting again holds again: the operator looks at the fresh inventory before commissioning.
  if (node.state === 'inspecting' && verb === 'inspect') return phase('inspecting', 'inspecting', true, 'inspecting');
  return undefined;
}

function isHoldPoint(state: NodeState): state is HoldPoint {
  return state === 'enrolling' || state === 'inspecting';
}

/**
 * Decides what an operator's request does to a machine (`undefined` when it is not enrolled yet): the move, or
 * INVALID_STATE naming the current state. Deciding writes nothing; the caller carries the move out in one
 * transaction with its event (`metal.node.<state>`).
 *
 * @example
 * ```ts
 * decideRequest({ state: 'available' }, 'deploy'); // { to: 'deploying', startsWorkflow: true, … }
 * decideRequest({ state: 'deployed' }, 'deploy'); // throws INVALID_STATE: cannot deploy a machine in state 'deployed'
 * ```
 */
export function decideRequest(
  node: LifecycleSnapshot | undefined,
  verb: LifecycleVerb,
  options: RequestOptions = {},
): LifecycleMove {
  if (verb === 'enroll' || verb === 'adopt') {
    if (node !== undefined) refuse(verb, node.state);
    return verb === 'adopt' ? phase(undefined, 'adopting') : phase(undefined, 'enrolling', true, options.holdAfter);
  }
  if (node?.held === true && isHoldPoint(node.state)) {
    return decideHeld({ ...node, state: node.state }, verb) ?? refuse(verb, node.state, true);
  }
  if (node === undefined || !ACCEPTED_IN[verb].includes(node.state)) refuse(verb, node?.state);
  const current = node.state;
  switch (verb) {
    case 'inspect':
      return phase(current, 'inspecting');
    case 'commission':
      return phase(current, 'commissioning');
    case 'deploy':
      return phase(current, 'deploying');
    case 'release':
      return phase(current, 'releasing');
    case 'retire':
      return phase(current, 'retiring');
    case 'abort':
      return {
        from: current,
        to: 'failed',
        startsWorkflow: false,
        enrolling: node.enrolling === true,
        failedFrom: isPhaseState(current) ? current : undefined,
        holdAfter: node.holdAfter,
        held: false,
      };
    case 'recover': {
      // The phase it failed in runs again (still part of its enroll if it was, with its hold point); with none known,
      // a fresh inspect.
      const enrolling = node.failedFrom !== undefined && node.enrolling === true;
      return phase(current, node.failedFrom ?? 'inspecting', enrolling, enrolling ? node.holdAfter : undefined);
    }
  }
}

/**
 * Decides where a machine goes when its phase's workflow ends (the `metal` reconciler, woken by the workflow's
 * `owner`): on success the next state, or the next phase of an enroll; on failure or cancellation `failed`, keeping
 * the phase (and whether it was part of an enroll) for `recover`. A node not in a phase (an abort moved it before the
 * workflow ended) stays where it is: undefined.
 *
 * @example
 * ```ts
 * decideWorkflowEnd({ state: 'deploying' }, 'succeeded'); // { to: 'deployed', startsWorkflow: false, … }
 * decideWorkflowEnd({ state: 'enrolling', enrolling: true }, 'succeeded'); // { to: 'inspecting', startsWorkflow: true, … }
 * ```
 */
export function decideWorkflowEnd(
  node: LifecycleSnapshot,
  outcome: 'succeeded' | 'failed' | 'cancelled',
): LifecycleMove | undefined {
  const { state } = node;
  // A held machine runs no workflow of metal's: an end it hears of is not its phase's.
  if (!isPhaseState(state) || node.held === true) return undefined;
  const enrolling = node.enrolling === true;
  const holdAfter = enrolling ? node.holdAfter : undefined;
  if (outcome !== 'succeeded') {
    return { from: state, to: 'failed', startsWorkflow: false, enrolling, failedFrom: state, holdAfter, held: false };
  }
  switch (state) {
    case 'enrolling':
      return holdAfter === 'enrolling' ? hold(state) : phase(state, 'inspecting', true, holdAfter);
    case 'inspecting':
      if (!enrolling) return rest(state, 'available');
      return holdAfter === 'inspecting' ? hold(state) : phase(state, 'commissioning', true);
    case 'commissioning':
    case 'releasing':
      return rest(state, 'available');
    case 'deploying':
    case 'adopting':
      return rest(state, 'deployed');
    case 'retiring':
      return rest(state, 'retired');
  }
}
