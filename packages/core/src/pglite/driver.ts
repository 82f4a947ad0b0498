import { PGlite } from '@electric-sql/pglite';
import type { SqlDatabase } from '../sql/executor';
import { PgliteSession } from './session';

const INT8 = 20;

/** Options of {@link createPgliteDatabase}. */
export interface PgliteDatabaseOptions {
  /** A data directory to keep the database in; in memory when omitted. */
  dataDir?: string;
  /** An existing PGlite instance to use instead; it is not closed by `close()`. */
  client?: PGlite;
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
  if (options.client) return new PgliteSession(options.client, false);
  const client = await PGlite.create({
    ...(options.dataDir ? { dataDir: options.dataDir } : {}),
    parsers: { [INT8]: (value: string) => Number(value) },
  });
  return new PgliteSession(client, true);
}
