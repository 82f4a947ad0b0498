import { ComputeError } from '../errors';
import { isStandardSchema } from '../manifest';
import type { CommandKindEntry, CommandKindRegistry } from './types';

// Two or more dotted segments, the first lower-case, later ones may be camelCase: `boot.kexec`, `driver.invoke`,
// `site.httpProxy` (a kind the reference pages name).
const KIND_NAME = /^[a-z][a-z0-9-]*(\.[a-zA-Z][a-zA-Z0-9-]*)+$/;

/**
 * Whether a string is a valid command kind name: two or more dotted segments, the first lower-case, such as
 * `boot.kexec` or `site.httpProxy`.
 *
 * @example
 * ```ts
 * isCommandKindName('boot.kexec'); // true
 * isCommandKindName('site.httpProxy'); // true
 * isCommandKindName('Reboot'); // false
 * ```
 */
export function isCommandKindName(name: unknown): name is string {
  return typeof name === 'string' && KIND_NAME.test(name);
}

/**
 * Builds the registry of command kinds from every module's `commandKinds`. A name that is not dotted lower-case, or a
 * payload that is not a manifest or Standard Schema, is INVALID_CONFIG with `details.path` at the entry; a kind two
 * modules register is INVALID_CONFIG naming both modules.
 *
 * @example
 * ```ts
 * const kinds = createCommandKindRegistry([
 *   { moduleId: 'metal', definition: { name: 'boot.kexec', payload: manifest({ kernel: field.string() }), destructive: true } },
 * ]);
 * ```
 */
export function createCommandKindRegistry(entries: readonly CommandKindEntry[]): CommandKindRegistry {
  const byName = new Map<string, CommandKindEntry>();
  entries.forEach((entry, index) => {
    const name: unknown = entry?.definition?.name;
    if (!isCommandKindName(name)) {
      throw new ComputeError(
        'INVALID_CONFIG',
        `command kind ${JSON.stringify(name)} of module ${entry?.moduleId} must be dotted, its first segment lower-case, like boot.kexec`,
        { details: { path: ['commandKinds', index, 'name'], moduleId: entry?.moduleId } },
      );
    }
    if (!isStandardSchema(entry.definition.payload)) {
      throw new ComputeError('INVALID_CONFIG', `command kind ${name} needs a payload manifest or Standard Schema`, {
        details: { path: ['commandKinds', index, 'payload'], moduleId: entry.moduleId },
      });
    }
    const existing = byName.get(name);
    if (existing) {
      throw new ComputeError(
        'INVALID_CONFIG',
        `command kind ${name} is registered by both ${existing.moduleId} and ${entry.moduleId}`,
        {
          details: { path: ['commandKinds', index, 'name'], kind: name, modules: [existing.moduleId, entry.moduleId] },
        },
      );
    }
    byName.set(name, Object.freeze({ moduleId: entry.moduleId, definition: entry.definition }));
  });
  const list = Object.freeze([...byName.values()]);
  return Object.freeze({
    get: (name: string) => byName.get(name),
    has: (name: string) => byName.has(name),
    list: () => list,
  });
}
