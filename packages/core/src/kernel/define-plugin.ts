import { ComputeError } from '../errors';
import type { ComputeModule, Extension } from './module';

const ID = /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/;

/** What {@link definePlugin} takes. */
export type PluginDefinition = Omit<ComputeModule, 'extensions'> & {
  readonly extensions?: readonly Extension[];
  readonly profiles?: readonly unknown[];
};

/**
 * Checks a module's id. Ids are kebab-case: lower-case letters and digits, `-` between words.
 *
 * @example
 * ```ts
 * assertModuleId('acme-autoinstall', ['plugins', 0, 'id']);
 * ```
 */
export function assertModuleId(id: unknown, path: readonly (string | number)[]): asserts id is string {
  if (typeof id !== 'string' || !ID.test(id) || id.length > 64) {
    throw new ComputeError('INVALID_CONFIG', `module id must be kebab-case (at most 64 characters): ${String(id)}`, {
      details: { path },
    });
  }
}

/**
 * Declares a plugin: the same parts as a module, plus `profiles` for the provision engine. Returns it frozen with
 * `kind: 'plugin'`, keeping the literal `id` type.
 *
 * @example
 * ```ts
 * const acmeAutoinstall = definePlugin({ id: 'acme-autoinstall', extensions: [renderAutoinstallIso], profiles: [ubuntuAutoinstall] });
 * const compute = await betterCompute({ plugins: [acmeAutoinstall] });
 * ```
 */
export function definePlugin<const P extends PluginDefinition>(plugin: P): P & { readonly kind: 'plugin' } {
  if (typeof plugin !== 'object' || plugin === null) {
    throw new ComputeError('INVALID_CONFIG', 'a plugin must be an object', { details: { path: [] } });
  }
  assertModuleId(plugin.id, ['id']);
  if (plugin.extensions !== undefined && !Array.isArray(plugin.extensions)) {
    throw new ComputeError('INVALID_CONFIG', 'extensions must be an array', { details: { path: ['extensions'] } });
  }
  plugin.extensions?.forEach((ext, i) => {
    if (typeof ext !== 'object' || ext === null || typeof ext.extension !== 'string' || typeof ext.id !== 'string') {
      throw new ComputeError('INVALID_CONFIG', 'an extension needs a string `extension` and `id`', {
        details: { path: ['extensions', i] },
      });
    }
  });
  if (plugin.profiles !== undefined && !Array.isArray(plugin.profiles)) {
    throw new ComputeError('INVALID_CONFIG', 'profiles must be an array', { details: { path: ['profiles'] } });
  }
  return Object.freeze({ ...plugin, kind: 'plugin' as const });
}
