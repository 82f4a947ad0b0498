import { type ErrorPath, isStandardSchema, parseDuration } from '@better-compute/core';
import { deepFreeze, isPlainObject, refuseConfig } from '@better-compute/core/checks';
import { isCommandKindName } from '@better-compute/core/kernel';
import { checkProfileStep, checkStepId } from './check-profile-step';
import { checkInteger, checkKnownFields, checkOneOf, checkString, copyJson, type Fields, quote } from './field-checks';
import {
  type AgentPlace,
  type AgentStepDefinition,
  type ControlPlaneStepDefinition,
  STEP_PLACES,
  type Step,
  type StepDefinition,
  type StepInputSchema,
} from './types';

/**
 * The fields of a step definition, in the order they are checked.
 *
 * @example
 * ```ts
 * STEP_DEFINITION_FIELDS.includes('sends'); // true
 * ```
 */
export const STEP_DEFINITION_FIELDS = Object.freeze([
  'id',
  'version',
  'runsOn',
  'timeout',
  'retries',
  'retrySafe',
  'input',
  'run',
  'relays',
  'sends',
  'command',
  'await',
  'cleanup',
  'description',
] as const);

const KNOWN_FIELDS: ReadonlySet<string> = new Set(STEP_DEFINITION_FIELDS);
const AGENT_PLACES: readonly AgentPlace[] = STEP_PLACES.filter((place) => place !== 'control-plane');

function checkList(value: unknown, path: ErrorPath, label: string, check: (item: unknown, at: ErrorPath) => void) {
  if (!Array.isArray(value)) refuseConfig(`${label} must be an array`, path);
  const seen = new Set<unknown>();
  for (let i = 0; i < value.length; i += 1) {
    const item: unknown = value[i];
    check(item, [...path, i]);
    if (seen.has(item)) refuseConfig(`${label} lists ${quote(item)} twice`, [...path, i]);
    seen.add(item);
  }
}

function checkControlPlane(fields: Fields): void {
  if (typeof fields.run !== 'function') refuseConfig('a control-plane step needs run, a function', ['run']);
  if (fields.command !== undefined) {
    refuseConfig('command is for agent steps; a control-plane step sends commands from run (see relays and sends)', [
      'command',
    ]);
  }
  if (fields.await !== undefined) refuseConfig('await is for agent steps, not control-plane steps', ['await']);
  if (fields.relays !== undefined) {
    checkList(fields.relays, ['relays'], 'relays', (place, at) => checkOneOf(place, AGENT_PLACES, at, 'a relay'));
  }
  if (fields.sends !== undefined) {
    checkList(fields.sends, ['sends'], 'sends', (kind, at) => {
      if (!isCommandKindName(kind)) {
        refuseConfig(`sends lists ${quote(kind)}: a command kind is dotted, lower-case first, like site.httpProxy`, at);
      }
    });
  }
}

function checkAgent(fields: Fields): void {
  if (!isCommandKindName(fields.command)) {
    refuseConfig(
      `an agent step needs command, a dotted lower-case command kind like boot.kexec, not ${quote(fields.command)}`,
      ['command'],
    );
  }
  if (fields.run !== undefined)
    refuseConfig('run is for control-plane steps; an agent step sends its command', ['run']);
  if (fields.relays !== undefined) refuseConfig('relays is for control-plane steps, not agent steps', ['relays']);
  if (fields.sends !== undefined) {
    refuseConfig('sends is for control-plane steps; an agent step sends the kind its command names', ['sends']);
  }
  if (fields.await !== undefined) checkOneOf(fields.await, ['rejoin'], ['await'], 'await');
}

function checkStepDefinition(definition: unknown): asserts definition is StepDefinition {
  if (!isPlainObject(definition)) refuseConfig('a step definition must be a plain object', []);
  // A defined step spread into a variant (`defineStep({ ...step, timeout: '1m' })`) carries `extension: 'step'`.
  const { extension, ...fields }: Fields = definition;
  if (extension !== undefined && extension !== 'step')
    refuseConfig("extension must be 'step' when given", ['extension']);
  checkKnownFields(fields, KNOWN_FIELDS, [], 'a step definition');
  checkStepId(fields.id, ['id'], 'step id');
  if (fields.version !== undefined) checkString(fields.version, ['version'], 'version', { min: 1, max: 64 });
  checkOneOf(fields.runsOn, STEP_PLACES, ['runsOn'], 'runsOn');
  if (fields.timeout === undefined)
    refuseConfig("a step needs timeout, one attempt's budget such as '10m'", ['timeout']);
  parseDuration(fields.timeout, ['timeout']);
  if (fields.retries !== undefined) checkInteger(fields.retries, ['retries'], 'retries', 0, 100);
  if (typeof fields.retrySafe !== 'boolean') refuseConfig('a step needs retrySafe, true or false', ['retrySafe']);
  if (!isStandardSchema(fields.input)) refuseConfig('a step needs input, a manifest or a Standard Schema', ['input']);
  if (fields.runsOn === 'control-plane') checkControlPlane(fields);
  else checkAgent(fields);
  if (fields.cleanup !== undefined) {
    if (!Array.isArray(fields.cleanup)) refuseConfig('cleanup must be an array of profile steps', ['cleanup']);
    for (let i = 0; i < fields.cleanup.length; i += 1) checkProfileStep(fields.cleanup[i], ['cleanup', i]);
  }
  if (fields.description !== undefined) checkString(fields.description, ['description'], 'description', { max: 4096 });
}

/**
 * Defines a step profiles can `use`. The shape is checked up front: every refusal is INVALID_CONFIG with
 * `details.path` naming the field (`['timeout']`, `['sends', 1]`, `['cleanup', 0, 'use']`). The result is the
 * definition frozen, with `extension: 'step'`, its `relays`, `sends` and `cleanup` frozen copies; `run`'s input is typed
 * from `input`.
 *
 * @example
 * ```ts
 * export const talosReady = defineStep({
 *   id: 'wait.talosReady',
 *   runsOn: 'control-plane',
 *   relays: ['site'],
 *   sends: ['site.httpProxy'],
 *   timeout: '20m',
 *   retrySafe: true,
 *   input: manifest({ port: field.int({ min: 1, max: 65535 }).default(50000) }),
 *   async run(input, ctx) {
 *     return { port: input.port }; // input.port: number
 *   },
 * });
 * ```
 */
export function defineStep<const Id extends string, S extends StepInputSchema>(
  definition: ControlPlaneStepDefinition<S> & { readonly id: Id },
): Step<ControlPlaneStepDefinition<S> & { readonly id: Id }>;
export function defineStep<const Id extends string, S extends StepInputSchema>(
  definition: AgentStepDefinition<S> & { readonly id: Id },
): Step<AgentStepDefinition<S> & { readonly id: Id }>;
export function defineStep(definition: StepDefinition): Step {
  checkStepDefinition(definition);
  const step: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(definition)) {
    if (value !== undefined) step[key] = value;
  }
  // Copies, so a caller mutating its arrays later cannot change a registered step; input and run stay the caller's.
  if (definition.runsOn === 'control-plane') {
    if (definition.relays !== undefined) step.relays = Object.freeze([...definition.relays]);
    if (definition.sends !== undefined) step.sends = Object.freeze([...definition.sends]);
  }
  if (definition.cleanup !== undefined) step.cleanup = deepFreeze(copyJson(definition.cleanup), ['cleanup']);
  step.extension = 'step';
  return Object.freeze(step) as unknown as Step;
}
