import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { ComputeError } from '../errors';
import type { SqlDatabase } from '../sql/executor';
import { PgliteSession } from './session';
import { PGLITE_TEMPLATE_ENV, pgliteFromTemplate } from './template';

const INT8 = 20;

/** Options of {@link createPgliteDatabase}. */
export interface PgliteDatabaseOptions {
  /** A data directory to keep the database in; in memory when omitted. */
  dataDir?: string;
  /** An existing PGlite instance to use instead; it is not closed by `close()`. */
  client?: PGlite;
  /**
   * A transaction holding PGlite's one connection longer is rolled back and the connection handed on, so one stuck
   * caller cannot stall every other (0 turns it off). Default 60,000 ms.
   */
  transactionTimeoutMs?: number;
}

/** The limits {@link createPgliteDatabase} applies when not told otherwise. */
export const PGLITE_DEFAULTS = Object.freeze({ transactionTimeoutMs: 60_000 });

function transactionTimeout(options: PgliteDatabaseOptions): number {
  const value = options.transactionTimeoutMs ?? PGLITE_DEFAULTS.transactionTimeoutMs;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw new ComputeError('INVALID_CONFIG', 'transactionTimeoutMs must be an integer number of milliseconds >= 0', {
      details: { path: ['transactionTimeoutMs'] },
    });
  }
  return value;
}

/**
 * The embedded PostgreSQL backend: PGlite in memory (tests) or in a data directory (`start`).
 *
 * @example
 * ```ts
 * import { createPgliteDatabase } from 'better-compute/core/pglite';
 * const database = await createPgliteDatabase({ dataDir: './data' });
 * ```
 */
export async function createPgliteDatabase(options: PgliteDatabaseOptions = {}): Promise<SqlDatabase> {
  const limits = { transactionTimeoutMs: transactionTimeout(options) };
  if (options.client) return new PgliteSession(options.client, false, limits);
  const parsers = { [INT8]: (value: string) => Number(value) };
  const template = process.env[PGLITE_TEMPLATE_ENV];
  const dataDir = options.dataDir ? { dataDir: options.dataDir } : {};
  // The template only ever makes a new database: a data directory that holds one is opened as it is.
  const isNew = options.dataDir === undefined || !existsSync(join(options.dataDir, 'PG_VERSION'));
  const client =
    template && isNew
      ? await pgliteFromTemplate(template, { ...dataDir, parsers })
      : await PGlite.create({ ...dataDir, parsers });
  return new PgliteSession(client, true, limits);
}
