import { type ErrorPath, isStandardSchema } from '@better-compute/core';
import { isPlainObject, refuseConfig } from '@better-compute/core/checks';
import { BUILTIN_CONFIG_UNITS } from './builtins';
import type { ConfigUnit, ConfigUnitRegistry } from './types';

/** What a config unit's name looks like: lower-case letters, digits and `-`, starting with a letter. */
export const CONFIG_UNIT_NAME_PATTERN = /^[a-z][a-z0-9-]*$/;
const MAX_NAME = 64;
const MAX_DESCRIPTION = 4096;
const UNIT_FIELDS: ReadonlySet<string> = new Set(['name', 'description', 'settings']);

function checkUnit(value: unknown, path: ErrorPath): ConfigUnit {
  if (!isPlainObject(value)) refuseConfig('a config unit must be an object { name, description, settings }', path);
  for (const key of Object.keys(value)) {
    if (!UNIT_FIELDS.has(key)) refuseConfig(`a config unit has no field ${JSON.stringify(key)}`, [...path, key]);
  }
  const { name, description, settings } = value;
  if (typeof name !== 'string' || name.length > MAX_NAME || !CONFIG_UNIT_NAME_PATTERN.test(name)) {
    refuseConfig(
      `a config unit name is lower-case letters, digits and -, starting with a letter, at most ${MAX_NAME} characters`,
      [...path, 'name'],
    );
  }
  if (typeof description !== 'string' || description.length > MAX_DESCRIPTION) {
    refuseConfig(`description must be a string of at most ${MAX_DESCRIPTION} characters`, [...path, 'description']);
  }
  if (!isStandardSchema(settings))
    refuseConfig('settings must be a manifest or a Standard Schema', [...path, 'settings']);
  return Object.freeze({ name, description, settings });
}

/**
 * The config units the engine resolves: the built-ins, then `units` (a unit named like a built-in replaces it). A unit
 * that is not `{ name, description, settings }` with a Standard Schema as settings, or a name given twice, is
 * INVALID_CONFIG with `details.path` (`['configUnits', i, …]`).
 *
 * @example
 * ```ts
 * const units = createConfigUnitRegistry([{ name: 'acme-nic-firmware', description: 'NIC firmware', settings }]);
 * units.get('sysctl'); // the built-in
 * ```
 */
export function createConfigUnitRegistry(units: readonly ConfigUnit[] = []): ConfigUnitRegistry {
  if (!Array.isArray(units)) refuseConfig('configUnits must be an array of config units', ['configUnits']);
  const registry = new Map<string, ConfigUnit>(BUILTIN_CONFIG_UNITS.map((unit) => [unit.name, unit]));
  const given = new Set<string>();
  for (let i = 0; i < units.length; i += 1) {
    const unit = checkUnit(units[i], ['configUnits', i]);
    if (given.has(unit.name)) refuseConfig(`config unit ${unit.name} is given twice`, ['configUnits', i, 'name']);
    given.add(unit.name);
    registry.set(unit.name, unit);
  }
  return registry;
}

/**
 * The built-in config units alone, as a registry.
 *
 * @example
 * ```ts
 * await resolveHostSection(BUILTIN_CONFIG_UNIT_REGISTRY, profile.hostConfig, labels);
 * ```
 */
export const BUILTIN_CONFIG_UNIT_REGISTRY: ConfigUnitRegistry = createConfigUnitRegistry();
