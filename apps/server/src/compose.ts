import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { betterCompute, type Compute, ComputeError, type SqlDatabase } from '@better-compute/core';
import { createPgliteDatabase } from '@better-compute/core/pglite';
import { createPostgresDatabase } from '@better-compute/core/postgres';
import { metal } from '@better-compute/metal';
import { loadOrCreateKeyFile, type Pki, parseSecretKey, pki } from '@better-compute/pki';
import { provisionModule } from '@better-compute/provision';
import type { ServerConfig } from './config';
import { loadPluginConfig } from './config-module';
import { kernelLogger, type ServerLogger } from './logger';

/** The composed control plane of one process. */
export interface Composed {
  compute: Compute;
  security: Pki;
  /** The 32-byte at-rest key (the CA's key is sealed under it). */
  key: Uint8Array;
  database: SqlDatabase;
}

/** Rewrites an INVALID_CONFIG at `[from, …]` to `[variable, …]`, so the one line names the variable to fix. */
function renamePath(error: unknown, from: string, variable: string): unknown {
  if (!(error instanceof ComputeError) || error.code !== 'INVALID_CONFIG') return error;
  const path = (error.details as { path?: (string | number)[] } | undefined)?.path;
  if (!Array.isArray(path) || path[0] !== from) return error;
  return new ComputeError('INVALID_CONFIG', `${variable}: ${error.message}`, {
    details: { path: [variable, ...path.slice(1)] },
  });
}

async function readKey(config: ServerConfig): Promise<Uint8Array> {
  if (config.secretKey !== undefined) {
    try {
      return parseSecretKey(config.secretKey, ['BETTER_COMPUTE_SECRET_KEY']);
    } catch (error) {
      throw renamePath(error, 'key', 'BETTER_COMPUTE_SECRET_KEY');
    }
  }
  try {
    return await loadOrCreateKeyFile(config.keyFile);
  } catch (error) {
    if (error instanceof ComputeError) {
      throw new ComputeError('INVALID_CONFIG', 'BETTER_COMPUTE_SECRET_KEY_FILE does not hold a 32-byte key', {
        details: { path: ['BETTER_COMPUTE_SECRET_KEY_FILE'] },
      });
    }
    throw new ComputeError('INVALID_CONFIG', 'BETTER_COMPUTE_SECRET_KEY_FILE cannot be read or created', {
      details: { path: ['BETTER_COMPUTE_SECRET_KEY_FILE'] },
    });
  }
}

/**
 * Builds the control plane from the configuration, as the reference sample composes it: the pki module, provision
 * borrowing metal's (and the plugins') steps and profiles, metal, and the plugins; the PKI's ports handed to the
 * kernel. Opens the database (PostgreSQL at DATABASE_URL, else PGlite in `<dataDir>/pglite`), reads or creates the
 * at-rest key, and migrates (betterCompute does, under an advisory lock, so two processes starting at once both
 * succeed).
 *
 * @example
 * ```ts
 * const { compute, security } = await composeCompute(config, log);
 * ```
 */
export async function composeCompute(config: ServerConfig, log: ServerLogger): Promise<Composed> {
  // The plugin config module first: a refused one leaves nothing behind on disk.
  const plugin = await loadPluginConfig(config.configModule);
  await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  const key = await readKey(config);
  let security: Pki;
  try {
    security = pki({ key, ...(config.quorum ? { quorum: config.quorum } : {}) });
  } catch (error) {
    throw renamePath(error, 'quorum', 'BETTER_COMPUTE_QUORUM');
  }
  const plugins = plugin.plugins ?? [];
  const bareMetal = metal();
  let provision: ReturnType<typeof provisionModule>;
  try {
    // A simulating server deploys with the built-in cloud-init template, whose variables a real one takes from its
    // config module; the simulated OS joins by itself, so placeholders do.
    const userData =
      config.simulate > 0 && plugin.provision?.userData === undefined
        ? { userData: (await import('./simulate')).simulatedUserData(`https://localhost:${config.agentPort}`) }
        : {};
    provision = provisionModule({
      ...userData,
      ...plugin.provision,
      modules: [bareMetal, ...plugins, ...(plugin.provision?.modules ?? [])],
    });
  } catch (error) {
    throw configModuleError(error, config);
  }

  const database = config.databaseUrl
    ? createPostgresDatabase({ url: config.databaseUrl })
    : await createPgliteDatabase({ dataDir: join(config.dataDir, 'pglite') });
  try {
    const compute = await betterCompute({
      database,
      modules: [security.module, provision, bareMetal],
      plugins,
      pki: security.port(),
      secrets: security.secrets(database),
      attestation: security.attestation(),
      quorum: security.quorum(),
      logger: kernelLogger(log),
      shards: config.shards,
    });
    return { compute, security, key, database };
  } catch (error) {
    await database.close().catch(() => undefined);
    throw configModuleError(error, config);
  }
}

/** A module or plugin refused at composition is the plugin config module's fault when there is one. */
function configModuleError(error: unknown, config: ServerConfig): unknown {
  if (!(error instanceof ComputeError) || error.code !== 'INVALID_CONFIG' || config.configModule === undefined) {
    return error;
  }
  const path = (error.details as { path?: (string | number)[] } | undefined)?.path ?? [];
  return new ComputeError('INVALID_CONFIG', `BETTER_COMPUTE_CONFIG: ${error.message}`, {
    details: { path: ['BETTER_COMPUTE_CONFIG', ...(Array.isArray(path) ? path : [])] },
  });
}
