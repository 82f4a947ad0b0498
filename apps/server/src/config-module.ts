import { pathToFileURL } from 'node:url';
import { ComputeError, type ComputeModule } from '@better-compute/core';
import type { ProvisionOptions } from '@better-compute/provision';

/**
 * What a plugin config module (`BETTER_COMPUTE_CONFIG=./compute.config.ts`) exports, as `default` or as named
 * exports: plugins the server registers (and provision borrows steps and profiles from), and provision's options
 * (its own steps and profiles, user data, config units). `provision.modules` is added to the modules provision borrows
 * from, after metal and the plugins.
 *
 * @example
 * ```ts
 * // compute.config.ts
 * export default { plugins: [acmeAutoinstall], provision: { steps: [talosReady], profiles: [talos] } };
 * ```
 */
export interface ServerPluginConfig {
  plugins?: readonly ComputeModule[];
  provision?: ProvisionOptions;
}

function refuse(message: string, path: (string | number)[] = []): ComputeError {
  return new ComputeError('INVALID_CONFIG', `BETTER_COMPUTE_CONFIG ${message}`, {
    details: { path: ['BETTER_COMPUTE_CONFIG', ...path] },
  });
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null;

/**
 * Imports the plugin config module and checks its shape. A module that cannot be imported, or exports anything but
 * `plugins` (a list of modules) and `provision` (an object), is INVALID_CONFIG at `['BETTER_COMPUTE_CONFIG', …]`.
 * TypeScript modules load because the server runs under tsx.
 *
 * @example
 * ```ts
 * const plugins = await loadPluginConfig('/srv/compute.config.ts');
 * ```
 */
export async function loadPluginConfig(path: string | undefined): Promise<ServerPluginConfig> {
  if (path === undefined) return {};
  let exported: Record<string, unknown>;
  try {
    exported = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (cause) {
    const error = refuse('could not be imported');
    (error as Error & { cause?: unknown }).cause = cause;
    throw error;
  }
  const candidate = isObject(exported.default) ? exported.default : exported;
  const { plugins, provision } = candidate as { plugins?: unknown; provision?: unknown };
  if (plugins !== undefined) {
    if (!Array.isArray(plugins)) throw refuse('plugins must be a list of modules', ['plugins']);
    plugins.forEach((plugin, i) => {
      if (!isObject(plugin) || typeof plugin.id !== 'string') {
        throw refuse('plugins must be modules made by definePlugin', ['plugins', i]);
      }
    });
  }
  if (provision !== undefined && !isObject(provision)) {
    throw refuse('provision must be an object of provisionModule options', ['provision']);
  }
  return {
    ...(plugins === undefined ? {} : { plugins: plugins as ComputeModule[] }),
    ...(provision === undefined ? {} : { provision: provision as ProvisionOptions }),
  };
}
