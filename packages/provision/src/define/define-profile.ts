import { ComputeError, checkWhen, type ErrorPath, isComputeError, validateLabels } from '@better-compute/core';
import { deepFreeze, isPlainObject, refuseConfig } from '@better-compute/core/checks';
import { MAX_TOKEN_TTL_SECONDS } from '@better-compute/pki';
import { checkProfileStep, MAX_PROFILE_ID_LENGTH, PROFILE_ID_PATTERN } from './check-profile-step';
import {
  checkInteger,
  checkJsonObject,
  checkKnownFields,
  checkOneOf,
  checkString,
  copyJson,
  type Fields,
  quote,
} from './field-checks';
import {
  DRIVER_CONCERNS,
  DRIVER_NAME_PATTERN,
  MAX_PROFILE_VERSION,
  MAX_WORKFLOW_STEPS,
  type Profile,
  type ProfileDefinition,
} from './types';

/**
 * The fields of a profile, in the order they are checked.
 *
 * @example
 * ```ts
 * PROFILE_FIELDS.includes('hostConfig'); // true
 * ```
 */
export const PROFILE_FIELDS = Object.freeze([
  'id',
  'version',
  'target',
  'mode',
  'role',
  'description',
  'labels',
  'drivers',
  'image',
  'userData',
  'tokenTtlSeconds',
  'hostConfig',
  'steps',
  'acceptance',
  'cleanup',
] as const);

/**
 * What a profile's `image` looks like: `name@version` in the image catalog.
 *
 * @example
 * ```ts
 * IMAGE_REF_PATTERN.test('ubuntu/noble@24.04.1'); // true
 * ```
 */
export const IMAGE_REF_PATTERN = /^[a-z0-9][a-z0-9._/-]*@[A-Za-z0-9][A-Za-z0-9._+-]*$/;

/**
 * What a profile's `role` and a config unit's `name` look like.
 *
 * @example
 * ```ts
 * ROLE_PATTERN.test('host'); // true
 * ```
 */
export const ROLE_PATTERN = /^[a-z][a-z0-9-]*$/;

/**
 * The user-data kinds a profile may name.
 *
 * @example
 * ```ts
 * USER_DATA_KINDS.includes('talos'); // true
 * ```
 */
export const USER_DATA_KINDS = Object.freeze(['cloud-init', 'ignition', 'talos'] as const);

/**
 * The codes a profile check throws: INVALID_CONFIG for profiles in code, INVALID_INPUT for stored documents.
 *
 * @example
 * ```ts
 * const code: ProfileErrorCode = 'INVALID_INPUT';
 * ```
 */
export type ProfileErrorCode = 'INVALID_CONFIG' | 'INVALID_INPUT';

const KNOWN_FIELDS: ReadonlySet<string> = new Set(PROFILE_FIELDS);
const USER_DATA_FIELDS: ReadonlySet<string> = new Set(['kind', 'template']);
const HOST_CONFIG_FIELDS: ReadonlySet<string> = new Set(['units']);
const UNIT_FIELDS: ReadonlySet<string> = new Set(['name', 'settings', 'when']);
const STEP_LISTS = ['steps', 'acceptance', 'cleanup'] as const;

function refuseMetalField(field: string): never {
  return refuseConfig(`${field} is a metal field; a profile with target 'instance' cannot have it`, [field]);
}

function refuseOnAdopt(field: string): never {
  return refuseConfig(`an adopt profile takes over a running machine and cannot have ${field}`, [field]);
}

function checkDrivers(drivers: unknown): void {
  if (!isPlainObject(drivers)) refuseConfig('drivers must be an object of concern → driver binding', ['drivers']);
  for (const [concern, binding] of Object.entries(drivers)) {
    if (!(DRIVER_CONCERNS as readonly string[]).includes(concern)) {
      refuseConfig(`drivers names ${quote(concern)}, which is not a concern: ${DRIVER_CONCERNS.join(', ')}`, [
        'drivers',
        concern,
      ]);
    }
    checkJsonObject(binding, ['drivers', concern], `the ${concern} driver binding`);
    // The engine sends the binding as driver.invoke's `driver`; an agent picks the driver by its name.
    checkString((binding as Fields).name, ['drivers', concern, 'name'], `the ${concern} driver's name`, {
      min: 1,
      max: 64,
      pattern: DRIVER_NAME_PATTERN,
      shape: "like 'redfish' or 'ipmi'",
    });
  }
}

function checkUserData(userData: unknown): void {
  if (!isPlainObject(userData)) refuseConfig('userData must be an object { kind, template? }', ['userData']);
  checkKnownFields(userData, USER_DATA_FIELDS, ['userData'], 'userData');
  checkOneOf(userData.kind, USER_DATA_KINDS, ['userData', 'kind'], 'userData kind');
  if (userData.template !== undefined) {
    checkString(userData.template, ['userData', 'template'], 'userData template', { min: 1, max: 128 });
  }
}

function checkUnit(unit: unknown, path: ErrorPath, names: Set<string>): void {
  if (!isPlainObject(unit)) refuseConfig('a config unit must be an object { name, settings?, when? }', path);
  checkKnownFields(unit, UNIT_FIELDS, path, 'a config unit');
  const name: unknown = unit.name;
  checkString(name, [...path, 'name'], 'a unit name', { min: 1, max: 64, pattern: ROLE_PATTERN, shape: 'like sysctl' });
  if (names.has(name)) refuseConfig(`config unit ${quote(name)} is listed twice`, [...path, 'name']);
  names.add(name);
  if (unit.settings !== undefined) checkJsonObject(unit.settings, [...path, 'settings'], 'settings');
  if (unit.when !== undefined) checkWhen(unit.when as string, [...path, 'when']);
}

function checkHostConfig(hostConfig: unknown): void {
  if (!isPlainObject(hostConfig)) refuseConfig('hostConfig must be an object { units: [...] }', ['hostConfig']);
  checkKnownFields(hostConfig, HOST_CONFIG_FIELDS, ['hostConfig'], 'hostConfig');
  const units: unknown = hostConfig.units;
  if (!Array.isArray(units)) refuseConfig('hostConfig.units must be an array of config units', ['hostConfig', 'units']);
  const names = new Set<string>();
  // Indexes, not forEach, so a hole in a sparse array is refused rather than skipped.
  for (let i = 0; i < units.length; i += 1) checkUnit(units[i], ['hostConfig', 'units', i], names);
}

function checkStepList(list: unknown, field: string): number {
  if (!Array.isArray(list)) refuseConfig(`${field} must be an array of profile steps`, [field]);
  let count = 0;
  for (let i = 0; i < list.length; i += 1) {
    const step: unknown = list[i];
    checkProfileStep(step, [field, i]);
    // A failure step is a row of the workflow too, so it counts against the limit.
    count += isPlainObject((step as Fields).onFailure) ? 2 : 1;
  }
  return count;
}

function checkProfileDefinition(value: unknown): asserts value is ProfileDefinition {
  if (!isPlainObject(value)) refuseConfig('a profile must be a plain object', []);
  const fields: Fields = value;
  checkKnownFields(fields, KNOWN_FIELDS, [], 'a profile');
  checkString(fields.id, ['id'], 'profile id', {
    min: 1,
    max: MAX_PROFILE_ID_LENGTH,
    pattern: PROFILE_ID_PATTERN,
    shape: 'lower-case letters and digits with - or . between them, like ubuntu-24.04-autoinstall',
  });
  checkInteger(fields.version, ['version'], 'version', 1, MAX_PROFILE_VERSION);
  checkOneOf(fields.target, ['metal', 'instance'], ['target'], 'target');
  if (fields.mode !== undefined) checkOneOf(fields.mode, ['provision', 'adopt'], ['mode'], 'mode');
  const metal = fields.target === 'metal';
  const adopt = fields.mode === 'adopt';
  if (fields.role !== undefined) {
    checkString(fields.role, ['role'], 'role', { min: 1, max: 64, pattern: ROLE_PATTERN, shape: 'like host' });
  }
  if (fields.description !== undefined) checkString(fields.description, ['description'], 'description', { max: 4096 });
  if (fields.labels !== undefined) validateLabels(fields.labels, ['labels'], 'INVALID_CONFIG');
  if (fields.drivers !== undefined) {
    if (!metal) refuseMetalField('drivers');
    checkDrivers(fields.drivers);
  }
  if (fields.image !== undefined) {
    if (adopt) refuseOnAdopt('image');
    checkString(fields.image, ['image'], 'image', {
      min: 1,
      max: 256,
      pattern: IMAGE_REF_PATTERN,
      shape: 'name@version',
    });
  }
  if (fields.userData !== undefined) {
    if (adopt) refuseOnAdopt('userData');
    checkUserData(fields.userData);
  }
  if (fields.tokenTtlSeconds !== undefined) {
    checkInteger(fields.tokenTtlSeconds, ['tokenTtlSeconds'], 'tokenTtlSeconds', 1, MAX_TOKEN_TTL_SECONDS);
  }
  if (fields.hostConfig !== undefined) {
    if (!metal) refuseMetalField('hostConfig');
    checkHostConfig(fields.hostConfig);
  }
  if (fields.steps !== undefined && adopt) refuseOnAdopt('steps');
  let total = 0;
  for (const list of STEP_LISTS) {
    if (fields[list] !== undefined) total += checkStepList(fields[list], list);
  }
  if (total > MAX_WORKFLOW_STEPS) {
    refuseConfig(`a workflow holds at most ${MAX_WORKFLOW_STEPS} steps; this profile has ${total}`, ['steps']);
  }
}

/**
 * Checks a profile document as {@link defineProfile} does and returns a deeply frozen copy (fields set to `undefined`
 * left out). Refusals are ComputeErrors with `details.path` and the given code: INVALID_CONFIG for profiles in code,
 * INVALID_INPUT for documents sent to the profiles API.
 *
 * @example
 * ```ts
 * const profile = checkProfile(JSON.parse(body), 'INVALID_INPUT');
 * ```
 */
export function checkProfile(value: unknown, code: ProfileErrorCode = 'INVALID_CONFIG'): Profile {
  try {
    checkProfileDefinition(value);
    return deepFreeze(copyJson(value)) as Profile;
  } catch (error) {
    // The core checks (durations, when, JSON) only speak INVALID_CONFIG; a stored document is the caller's input.
    if (code === 'INVALID_INPUT' && isComputeError(error, 'INVALID_CONFIG')) {
      throw new ComputeError('INVALID_INPUT', error.message, { details: error.details, cause: error });
    }
    throw error;
  }
}

/**
 * Defines a profile: a versioned document of steps. It refuses unknown fields, malformed steps, ids and durations,
 * non-JSON values, fields of the other target, and an image, user data or steps on an `adopt` profile, with
 * INVALID_CONFIG and `details.path`; it returns a deeply frozen copy, leaving the caller's object as it was.
 *
 * @example
 * ```ts
 * export const ubuntuAutoinstall = defineProfile({
 *   id: 'ubuntu-24.04-autoinstall',
 *   version: 1,
 *   target: 'metal',
 *   role: 'host',
 *   steps: [
 *     { use: 'autoinstall.renderIso' },
 *     { use: 'power.setPower', on: 'site', with: { action: 'cycle' } },
 *     { use: 'wait.agentJoined', with: { role: 'node' } },
 *   ],
 * });
 * ```
 */
export function defineProfile<const P extends ProfileDefinition>(profile: P): Profile<P> {
  return checkProfile(profile) as Profile<P>;
}
