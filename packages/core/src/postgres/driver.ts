import postgres from 'postgres';
import { ComputeError } from '../errors';
import type { SqlDatabase } from '../sql/executor';
import { PostgresSession } from './session';

/** Options of {@link createPostgresDatabase}. */
export interface PostgresDatabaseOptions {
  /** A connection string, e.g. `postgres://user@127.0.0.1:5432/compute`. Defaults to `DATABASE_URL`. */
  url?: string;
  /** The pool size. Default 10. */
  max?: number;
}

/**
 * The production backend: postgres.js against a PostgreSQL server, for several workers in several processes.
 *
 * @example
 * ```ts
 * import { createPostgresDatabase } from 'better-compute/core/postgres';
 * const database = createPostgresDatabase({ url: process.env.DATABASE_URL });
 * ```
 */
export function createPostgresDatabase(options: PostgresDatabaseOptions = {}): SqlDatabase {
  const url = options.url ?? process.env.DATABASE_URL;
  if (!url) {
    throw new ComputeError('INVALID_CONFIG', 'a PostgreSQL connection string is required (url or DATABASE_URL)', {
      details: { path: ['url'] },
    });
  }
  const client = postgres(url, {
    max: options.max ?? 10,
    onnotice: () => undefined,
    types: {
      // int8 as a number, as the PGlite backend returns it.
      bigint: { to: 20, from: [20], serialize: (v: number | bigint) => String(v), parse: (v: string) => Number(v) },
      // A string bound to a json/jsonb parameter is JSON text already, as PGlite takes it; anything else is stringified.
      json: {
        to: 3802,
        from: [114, 3802],
        serialize: (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v)),
        parse: (v: string) => JSON.parse(v),
      },
    },
  });
  return new PostgresSession(client);
}
