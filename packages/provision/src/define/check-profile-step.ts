import { checkWhen, type ErrorPath, parseDuration } from '@better-compute/core';
import { isPlainObject, refuseConfig } from '@better-compute/core/checks';
import {
  checkInteger,
  checkJsonObject,
  checkKnownFields,
  checkOneOf,
  checkString,
  type Fields,
  quote,
} from './field-checks';
import { STEP_PLACES } from './types';

/**
 * What a step id (and a profile step's `use` or `fallback`) looks like: dotted, at least two segments, the first
 * lower-case (`[a-z][a-z0-9-]*`), the others starting with a letter (`[a-zA-Z][a-zA-Z0-9-]*`). A driver operation
 * `<concern>.<operation>` fits too.
 *
 * @example
 * ```ts
 * STEP_ID_PATTERN.test('power.setPower'); // true
 * STEP_ID_PATTERN.test('Power.set'); // false
 * ```
 */
export const STEP_ID_PATTERN = /^[a-z][a-z0-9-]*(\.[a-zA-Z][a-zA-Z0-9-]*)+$/;

/**
 * The longest step id, `use` or `fallback`.
 *
 * @example
 * ```ts
 * 'acme.renderIso'.length <= MAX_STEP_ID_LENGTH; // true
 * ```
 */
export const MAX_STEP_ID_LENGTH = 128;

/**
 * What a profile id looks like: lower-case letters and digits, with single `-` or `.` between them.
 *
 * @example
 * ```ts
 * PROFILE_ID_PATTERN.test('ubuntu-24.04-autoinstall'); // true
 * PROFILE_ID_PATTERN.test('Ubuntu--24'); // false
 * ```
 */
export const PROFILE_ID_PATTERN = /^[a-z0-9]+([.-][a-z0-9]+)*$/;

/**
 * The longest profile id.
 *
 * @example
 * ```ts
 * 'ubuntu-24.04-autoinstall'.length <= MAX_PROFILE_ID_LENGTH; // true
 * ```
 */
export const MAX_PROFILE_ID_LENGTH = 128;

/**
 * The fields of a profile step, in the order they are checked.
 *
 * @example
 * ```ts
 * PROFILE_STEP_FIELDS.includes('onFailure'); // true
 * ```
 */
export const PROFILE_STEP_FIELDS = Object.freeze([
  'use',
  'on',
  'with',
  'name',
  'when',
  'timeout',
  'retries',
  'onFailure',
  'await',
  'fallback',
] as const);

const KNOWN_FIELDS: ReadonlySet<string> = new Set(PROFILE_STEP_FIELDS);
const FAILURE_POLICIES = ['fail', 'continue', 'rescue'] as const;
const STEP_ID_SHAPE = 'dotted with a lower-case first segment, like power.setPower or acme.renderIso';

/**
 * Checks a step id, `use` or `fallback` against {@link STEP_ID_PATTERN} and {@link MAX_STEP_ID_LENGTH}.
 *
 * @example
 * ```ts
 * checkStepId(step.fallback, ['steps', 0, 'fallback'], 'fallback');
 * ```
 */
export function checkStepId(value: unknown, path: ErrorPath, label: string): asserts value is string {
  checkString(value, path, label, { min: 1, max: MAX_STEP_ID_LENGTH, pattern: STEP_ID_PATTERN, shape: STEP_ID_SHAPE });
}

function checkOnFailure(value: unknown, path: ErrorPath, nested: boolean): void {
  if (typeof value === 'string') {
    checkOneOf(value, FAILURE_POLICIES, path, 'onFailure');
    return;
  }
  if (!isPlainObject(value)) {
    refuseConfig(`onFailure must be 'fail', 'continue', 'rescue' or a profile step, not ${quote(value)}`, path);
  }
  // One level only: the step that runs on failure has no failure step of its own, so the chain cannot grow.
  if (nested) refuseConfig('an onFailure step cannot have an onFailure step of its own', path);
  checkStep(value, path, true);
}

function checkStep(step: unknown, path: ErrorPath, nested: boolean): void {
  if (!isPlainObject(step)) refuseConfig('a profile step must be a plain object with at least use', path);
  const fields: Fields = step;
  checkKnownFields(fields, KNOWN_FIELDS, path, 'a profile step');
  const at = (field: string): ErrorPath => [...path, field];
  if (fields.use === undefined) refuseConfig('a profile step needs use: a step id or a driver operation', at('use'));
  checkStepId(fields.use, at('use'), 'use');
  if (fields.on !== undefined) checkOneOf(fields.on, STEP_PLACES, at('on'), 'on');
  if (fields.with !== undefined) checkJsonObject(fields.with, at('with'), 'with');
  if (fields.name !== undefined) checkString(fields.name, at('name'), 'name', { min: 1, max: 256 });
  if (fields.when !== undefined) checkWhen(fields.when as string, at('when'));
  if (fields.timeout !== undefined) parseDuration(fields.timeout, at('timeout'));
  if (fields.retries !== undefined) checkInteger(fields.retries, at('retries'), 'retries', 0, 100);
  if (fields.onFailure !== undefined) checkOnFailure(fields.onFailure, at('onFailure'), nested);
  if (fields.await !== undefined) {
    checkOneOf(fields.await, ['rejoin'], at('await'), 'await');
    if (fields.on === 'control-plane') {
      refuseConfig(
        "await: 'rejoin' is for commands sent to an agent, not for a step on the control plane",
        at('await'),
      );
    }
  }
  if (fields.fallback !== undefined) checkStepId(fields.fallback, at('fallback'), 'fallback');
}

/**
 * Checks one profile step (the "Step options" of the workflows page), throwing INVALID_CONFIG with `details.path` at
 * the first offending field, relative to `path`. It checks the shape only: whether `use` resolves and `with` fits the
 * step's input is decided when the profile is expanded.
 *
 * @example
 * ```ts
 * checkProfileStep({ use: 'power.setPower', on: 'site', with: { action: 'cycle' } }, ['steps', 3]); // fine
 * checkProfileStep({ use: 'boot.kexec', on: 'control-plane', await: 'rejoin' }, ['steps', 4]);
 * // throws INVALID_CONFIG, details.path ['steps', 4, 'await']
 * ```
 */
export function checkProfileStep(step: unknown, path: ErrorPath): void {
  checkStep(step, path, false);
}
