import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresDatabase, type PostgresDatabaseOptions } from '../../src/postgres';
import { isSqlError, type SqlDatabase } from '../../src/sql';
import { type ScratchDatabase, scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

/**
 * A TCP proxy to the test server whose open connections can go silent (bytes stop flowing both ways, the sockets stay
 * open), as a half-open connection to a vanished host does; connections opened later work.
 */
async function silentableProxy(target: URL): Promise<{ port: number; silence(): void; close(): Promise<void> }> {
  const silenced = new WeakSet<Socket>();
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = tcpConnect(Number(target.port || 5432), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => sockets.delete(s));
    }
    client.on('data', (chunk) => silenced.has(client) || upstream.write(chunk));
    upstream.on('data', (chunk) => silenced.has(client) || client.write(chunk));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    port,
    silence: () => {
      for (const s of sockets) silenced.add(s);
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe.runIf(TEST_DATABASE_URL)('connection limits (postgres)', () => {
  let scratch: ScratchDatabase;
  const handles: SqlDatabase[] = [];
  const open = (options: Omit<PostgresDatabaseOptions, 'url'>, url = scratch.url) => {
    const db = createPostgresDatabase({ url, max: 1, ...options });
    handles.push(db);
    return db;
  };

  /** A handle with a 300 ms answer limit whose one connection answered once, through a proxy that can silence it. */
  const proxiedHandle = async () => {
    const proxy = await silentableProxy(new URL(scratch.url ?? ''));
    const url = new URL(scratch.url ?? '');
    url.host = `127.0.0.1:${proxy.port}`;
    const db = open({ statementTimeoutMs: 0, queryTimeoutMs: 300, connectTimeoutMs: 300 }, url.toString());
    expect((await db.query<{ n: number }>('SELECT 1 AS n')).rows).toEqual([{ n: 1 }]);
    return { db, proxy };
  };
  /** The same, its connection silent from now on. */
  const silencedHandle = async () => {
    const handle = await proxiedHandle();
    handle.proxy.silence();
    return handle;
  };

  beforeAll(async () => {
    scratch = await scratchPostgres();
  });
  afterAll(async () => {
    await Promise.all(handles.map((h) => h.close().catch(() => undefined)));
    await scratch?.drop();
  });

  it('names itself better-compute and applies the statement and idle-in-transaction limits to every connection', async () => {
    const db = open({ statementTimeoutMs: 45_000, idleInTransactionTimeoutMs: 50_000 });
    const { rows } = await db.query<{ app: string; st: string; idle: string }>(
      "SELECT current_setting('application_name') AS app, current_setting('statement_timeout') AS st, current_setting('idle_in_transaction_session_timeout') AS idle",
    );
    expect(rows[0]).toEqual({ app: 'better-compute', st: '45s', idle: '50s' });
  });

  it('has the server cancel a statement that runs past statementTimeoutMs', async () => {
    const db = open({ statementTimeoutMs: 200 });
    const error = await db.query('SELECT pg_sleep(5)').catch((err: unknown) => err);
    expect(isSqlError(error, 'query-canceled')).toBe(true);
  });

  it('ends a session left idle inside a transaction past idleInTransactionTimeoutMs, as a lost connection', async () => {
    const db = open({ idleInTransactionTimeoutMs: 200 });
    const error = await db
      .transaction(async (tx) => {
        await tx.query('SELECT 1');
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        await tx.query('SELECT 2');
      })
      .catch((err: unknown) => err);
    expect(isSqlError(error, 'connection-lost')).toBe(true);
    expect((error as { retryable: boolean }).retryable).toBe(true);
    // The pool opens a new connection for the next caller.
    expect((await db.query<{ n: number }>('SELECT 3 AS n')).rows).toEqual([{ n: 3 }]);
  });

  it('fails a connect that gets no answer after connectTimeoutMs, as a lost connection', async () => {
    // A listener that accepts and never speaks, as a server stuck in start-up does.
    const mute = createServer(() => undefined);
    await new Promise<void>((resolve) => mute.listen(0, '127.0.0.1', resolve));
    const address = mute.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    try {
      const db = open({ connectTimeoutMs: 300 }, `postgres://postgres@127.0.0.1:${port}/test`);
      const error = await db.query('SELECT 1').catch((err: unknown) => err);
      expect(isSqlError(error, 'connection-lost')).toBe(true);
    } finally {
      mute.close();
    }
  });

  it('gives up on a statement whose connection went silent after queryTimeoutMs, as a lost connection', async () => {
    const { db, proxy } = await silencedHandle();
    try {
      const error = await db.query('SELECT 2').catch((err: unknown) => err);
      expect(isSqlError(error, 'connection-lost')).toBe(true);
      expect((error as Error).message).toBe('no answer from the database within 300 ms');
    } finally {
      await proxy.close();
    }
  });

  it('gives up on a transaction whose BEGIN gets no answer after queryTimeoutMs, and runs nothing of it', async () => {
    const { db, proxy } = await silencedHandle();
    try {
      let ran = false;
      const error = await db
        .transaction(async (tx) => {
          ran = true;
          await tx.query('SELECT 2');
        })
        .catch((err: unknown) => err);
      expect(isSqlError(error, 'connection-lost')).toBe(true);
      expect(ran).toBe(false);
    } finally {
      await proxy.close();
    }
  });

  it('gives up on a nested transaction whose SAVEPOINT gets no answer after queryTimeoutMs, and so on the whole', async () => {
    const { db, proxy } = await proxiedHandle();
    try {
      let nestedRan = false;
      let nestedError: unknown;
      const error = await db
        .transaction(async (tx) => {
          await tx.query('SELECT 2');
          proxy.silence();
          nestedError = await tx
            .transaction(async (inner) => {
              nestedRan = true;
              await inner.query('SELECT 3');
            })
            .catch((err: unknown) => err);
          throw nestedError;
        })
        .catch((err: unknown) => err);
      expect(isSqlError(nestedError, 'connection-lost')).toBe(true);
      expect(nestedRan).toBe(false);
      expect(isSqlError(error, 'connection-lost')).toBe(true);
    } finally {
      await proxy.close();
    }
  });

  it('refuses a limit that is not a whole number of milliseconds, and a query timeout the server would not beat', () => {
    const url = scratch.url;
    expect(() => createPostgresDatabase({ url, connectTimeoutMs: -1 })).toThrowError(
      expect.objectContaining({ code: 'INVALID_CONFIG', details: { path: ['connectTimeoutMs'] } }),
    );
    expect(() => createPostgresDatabase({ url, statementTimeoutMs: 1.5 })).toThrowError(
      expect.objectContaining({ code: 'INVALID_CONFIG', details: { path: ['statementTimeoutMs'] } }),
    );
    expect(() => createPostgresDatabase({ url, statementTimeoutMs: 10_000, queryTimeoutMs: 10_500 })).toThrowError(
      expect.objectContaining({ code: 'INVALID_CONFIG', details: { path: ['queryTimeoutMs'] } }),
    );
  });
});
