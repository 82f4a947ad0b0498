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
  /** How long opening a connection may take before it fails (`connection-lost`, retryable). Default 5,000 ms. */
  connectTimeoutMs?: number;
  /** The server cancels a statement running longer (`statement_timeout`; 0 turns it off). Default 60,000 ms. */
  statementTimeoutMs?: number;
  /**
   * The server ends a session that sits idle inside a transaction longer (`idle_in_transaction_session_timeout`; 0
   * turns it off), so a wedged client cannot hold row locks. Default 60,000 ms.
   */
  idleInTransactionTimeoutMs?: number;
  /**
   * The client gives up on a statement with no answer after this long (0 turns it off): it cancels it and fails with
   * `connection-lost`, so a silent connection cannot hold a caller (a worker's key) for minutes. Default
   * `statementTimeoutMs` + 5,000 ms (65,000 ms); at least 1 s more than `statementTimeoutMs` when both are set.
   */
  queryTimeoutMs?: number;
  /** TCP keepalive's first probe after this much silence on a connection. Default 10,000 ms. */
  keepAliveMs?: number;
  /** The longest pause between attempts to reconnect to a server that is down. Default 2,000 ms. */
  reconnectMaxDelayMs?: number;
}

/** The connection limits {@link createPostgresDatabase} applies when not told otherwise. */
export const POSTGRES_DEFAULTS = Object.freeze({
  max: 10,
  connectTimeoutMs: 5_000,
  statementTimeoutMs: 60_000,
  idleInTransactionTimeoutMs: 60_000,
  keepAliveMs: 10_000,
  reconnectMaxDelayMs: 2_000,
});

function limit(options: PostgresDatabaseOptions, key: keyof PostgresDatabaseOptions, fallback: number): number {
  const value = options[key] ?? fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw new ComputeError('INVALID_CONFIG', `${key} must be an integer number of milliseconds >= 0`, {
      details: { path: [key] },
    });
  }
  return value;
}

/**
 * The production backend: postgres.js against a PostgreSQL server, for several workers in several processes. Every
 * connection carries limits (connect, statement, idle in transaction, keepalive, a client-side answer timeout), so a
 * server restart or a dead connection costs a caller seconds, not the driver's defaults of half a minute or more.
 *
 * @example
 * ```ts
 * import { createPostgresDatabase } from 'better-compute/core/postgres';
 * const database = createPostgresDatabase({ url: process.env.DATABASE_URL, statementTimeoutMs: 30_000 });
 * ```
 */
export function createPostgresDatabase(options: PostgresDatabaseOptions = {}): SqlDatabase {
  const url = options.url ?? process.env.DATABASE_URL;
  if (!url) {
    throw new ComputeError('INVALID_CONFIG', 'a PostgreSQL connection string is required (url or DATABASE_URL)', {
      details: { path: ['url'] },
    });
  }
  const max = limit(options, 'max', POSTGRES_DEFAULTS.max);
  if (max < 1) throw new ComputeError('INVALID_CONFIG', 'max must be at least 1', { details: { path: ['max'] } });
  const connectTimeoutMs = limit(options, 'connectTimeoutMs', POSTGRES_DEFAULTS.connectTimeoutMs);
  const statementTimeoutMs = limit(options, 'statementTimeoutMs', POSTGRES_DEFAULTS.statementTimeoutMs);
  const idleMs = limit(options, 'idleInTransactionTimeoutMs', POSTGRES_DEFAULTS.idleInTransactionTimeoutMs);
  const queryTimeoutMs = limit(options, 'queryTimeoutMs', statementTimeoutMs === 0 ? 0 : statementTimeoutMs + 5_000);
  if (queryTimeoutMs > 0 && statementTimeoutMs > 0 && queryTimeoutMs < statementTimeoutMs + 1_000) {
    // The server's own cancel should win for a statement that is merely slow; the client's is for silence.
    throw new ComputeError('INVALID_CONFIG', 'queryTimeoutMs must be at least statementTimeoutMs + 1000', {
      details: { path: ['queryTimeoutMs'] },
    });
  }
  const keepAliveMs = limit(options, 'keepAliveMs', POSTGRES_DEFAULTS.keepAliveMs);
  const reconnectMaxMs = limit(options, 'reconnectMaxDelayMs', POSTGRES_DEFAULTS.reconnectMaxDelayMs);
  const client = postgres(url, {
    max,
    onnotice: () => undefined,
    // postgres.js takes seconds; 0 or false turns a limit off.
    connect_timeout: connectTimeoutMs / 1000,
    keep_alive: keepAliveMs === 0 ? null : keepAliveMs / 1000,
    // The driver's own backoff grows to 20 s between reconnects; a control plane wants its database back sooner.
    backoff: (retries: number) => Math.min(0.05 * 2 ** retries, reconnectMaxMs / 1000) * (0.5 + Math.random() / 2),
    connection: {
      application_name: 'better-compute',
      statement_timeout: statementTimeoutMs,
      idle_in_transaction_session_timeout: idleMs,
    },
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
  return new PostgresSession(client, { queryTimeoutMs });
}
