import { ComputeError } from '../errors';
import type { CommandState } from './types';

/**
 * The states a command can still leave.
 *
 * @example
 * ```ts
 * OPEN_COMMAND_STATES.includes('running'); // true
 * ```
 */
export const OPEN_COMMAND_STATES: readonly CommandState[] = Object.freeze([
  'pending',
  'dispatched',
  'acked',
  'running',
]);

/**
 * The states a command never leaves.
 *
 * @example
 * ```ts
 * TERMINAL_COMMAND_STATES.includes('expired'); // true
 * ```
 */
export const TERMINAL_COMMAND_STATES: readonly CommandState[] = Object.freeze([
  'succeeded',
  'failed',
  'rejected',
  'expired',
  'cancelled',
]);

const NEXT: Readonly<Record<CommandState, readonly CommandState[]>> = {
  pending: ['dispatched', 'expired', 'cancelled'],
  dispatched: ['acked', 'rejected', 'expired', 'cancelled'],
  acked: ['running', 'rejected', 'expired', 'cancelled'],
  running: ['succeeded', 'failed', 'expired', 'cancelled'],
  succeeded: [],
  failed: [],
  rejected: [],
  expired: [],
  cancelled: [],
};

/**
 * Whether a command in state `from` may move to `to`.
 *
 * @example
 * ```ts
 * canTransitionCommand('dispatched', 'acked'); // true
 * canTransitionCommand('pending', 'running'); // false
 * ```
 */
export function canTransitionCommand(from: CommandState, to: CommandState): boolean {
  return NEXT[from]?.includes(to) ?? false;
}

/**
 * Whether a state is terminal.
 *
 * @example
 * ```ts
 * isTerminalCommandState('succeeded'); // true
 * ```
 */
export function isTerminalCommandState(state: CommandState): boolean {
  return TERMINAL_COMMAND_STATES.includes(state);
}

/**
 * Throws INVALID_STATE with `details: { reason: 'invalid-transition', state, to }` unless `from → to` is allowed.
 *
 * @example
 * ```ts
 * assertCommandTransition('acked', 'running');
 * ```
 */
export function assertCommandTransition(from: CommandState, to: CommandState, commandId?: string): void {
  if (canTransitionCommand(from, to)) return;
  throw new ComputeError(
    'INVALID_STATE',
    `command ${commandId ?? ''} cannot go from ${from} to ${to}`.replace('  ', ' '),
    {
      details: { reason: 'invalid-transition', state: from, to, ...(commandId ? { commandId } : {}) },
    },
  );
}
