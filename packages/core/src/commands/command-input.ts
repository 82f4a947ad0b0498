import type { Clock } from '../clock';
import { ComputeError, type ErrorPath } from '../errors';
import { assertStorableText } from '../json/storable-text';
import type { NewCommand } from './types';

/** The longest idempotency key a command may carry. */
export const MAX_COMMAND_KEY_LENGTH = 512;
/** The longest reason a command may record. */
export const MAX_COMMAND_REASON_LENGTH = 4096;

function invalid(path: ErrorPath, message: string): ComputeError {
  return new ComputeError('INVALID_INPUT', message, { details: { path } });
}

/**
 * Throws INVALID_INPUT at `path` unless `value` is a non-empty string of at most `max` characters that PostgreSQL can
 * store (no NUL, no lone surrogate). Also on `@better-compute/core/conformance` as `requireCommandText`, for another
 * implementation of the command queue to refuse what the kernel refuses.
 *
 * @example
 * ```ts
 * const reason = requireText(input.reason, ['reason'], MAX_COMMAND_REASON_LENGTH);
 * ```
 */
export function requireText(value: unknown, path: ErrorPath, max = MAX_COMMAND_KEY_LENGTH): string {
  if (typeof value !== 'string' || value.length === 0)
    throw invalid(path, `${path.join('.')} must be a non-empty string`);
  if (value.length > max) throw invalid(path, `${path.join('.')} must be at most ${max} characters`);
  assertStorableText(value, path);
  return value;
}

function optionalText(value: unknown, path: ErrorPath): void {
  if (value !== undefined) requireText(value, path);
}

/**
 * Checks the shape of a {@link NewCommand} (not its payload, which the kind's schema checks): ids, kind and key
 * non-empty strings of at most 512 characters PostgreSQL can store, `notAfter` a valid Date after the clock's now,
 * `wake` a `{ kind, key }`, `wakeOn` `'settle'` or `'failure'`, `afterKey` another key; otherwise INVALID_INPUT at the field. Also on `@better-compute/core/conformance`, for
 * another implementation of the command queue (the testkit's) to refuse what the kernel refuses.
 *
 * @example
 * ```ts
 * checkNewCommand(input, clock); // a notAfter already past: INVALID_INPUT, details.path ['notAfter']
 * ```
 */
export function checkNewCommand(command: NewCommand, clock: Clock): void {
  if (typeof command !== 'object' || command === null) throw invalid([], 'a command must be an object');
  requireText(command.nodeId, ['nodeId']);
  requireText(command.kind, ['kind']);
  requireText(command.key, ['key']);
  const notAfter: unknown = command.notAfter;
  if (!(notAfter instanceof Date) || Number.isNaN(notAfter.getTime())) {
    throw invalid(['notAfter'], 'notAfter must be a valid Date');
  }
  if (notAfter.getTime() <= clock.now().getTime()) throw invalid(['notAfter'], 'notAfter must be in the future');
  optionalText(command.batchId, ['batchId']);
  optionalText(command.workflowId, ['workflowId']);
  optionalText(command.stepId, ['stepId']);
  optionalText(command.targetNodeId, ['targetNodeId']);
  if (command.wake !== undefined) {
    if (typeof command.wake !== 'object' || command.wake === null)
      throw invalid(['wake'], 'wake must be { kind, key }');
    requireText(command.wake.kind, ['wake', 'kind']);
    requireText(command.wake.key, ['wake', 'key']);
  }
  if (command.wakeOn !== undefined && command.wakeOn !== 'settle' && command.wakeOn !== 'failure') {
    throw invalid(['wakeOn'], "wakeOn must be 'settle' or 'failure'");
  }
  optionalText(command.afterKey, ['afterKey']);
  if (command.afterKey === command.key) throw invalid(['afterKey'], 'a command cannot follow itself');
}
