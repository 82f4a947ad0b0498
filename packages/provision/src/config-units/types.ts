import type { Json, Manifest } from '@better-compute/core';
import type { StandardSchemaV1 } from '@standard-schema/spec';

/**
 * A config unit: one piece of host configuration bcd's host converger applies (sysctl values, hugepages, the NVIDIA
 * driver, …). A profile's `hostConfig` names units with their settings; `settings` validates them (defaults applied).
 *
 * @example
 * ```ts
 * const nicFirmware: ConfigUnit = {
 *   name: 'acme-nic-firmware',
 *   description: 'Pins the NIC firmware branch',
 *   settings: manifest({ branch: field.string({ pattern: '^[0-9]+\\.[0-9]+$' }) }),
 * };
 * ```
 */
export interface ConfigUnit {
  /** Lower-case letters, digits and `-`, starting with a letter, at most 64 characters (`sysctl`, `acme-nic-firmware`). */
  readonly name: string;
  readonly description: string;
  /** A manifest or any Standard Schema; its output must be a JSON object. */
  readonly settings: Manifest | StandardSchemaV1;
}

/** Every config unit the engine resolves, by name: the built-ins, with units of the same name replacing them. */
export type ConfigUnitRegistry = ReadonlyMap<string, ConfigUnit>;

/** One unit of a node's NodeSpec `host` section: its name and validated settings (defaults applied). */
export interface HostSectionUnit {
  name: string;
  settings: { [key: string]: Json };
}

/** The NodeSpec `host` section bcd's host converger applies: the units in the order the profile lists them. */
export interface HostSection {
  units: HostSectionUnit[];
}
