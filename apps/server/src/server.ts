import type { Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Compute, RunningWorker } from '@better-compute/core';
import { createAgentApi } from '@better-compute/pki/agent-api';
import { createAdaptorServer, type ServerType } from '@hono/node-server';
import { ensureRootAdmin } from './admin';
import { createAgentRequestListener } from './agent-server';
import { composeCompute } from './compose';
import type { ServerConfig } from './config';
import { createEventStreams } from './events-sse';
import { createHttpApp, type ReadinessCheck } from './http-app';
import type { ServerLogger } from './logger';
import { createMetrics } from './metrics';
import { loadTlsMaterial } from './tls';

/** A started server process. */
export interface RunningServer {
  /** The operator API's base URL, when this role serves it (else the health URL's base). */
  apiUrl: string;
  /** The agent API's base URL, when this role serves it. */
  agentUrl: string | undefined;
  /** The CA certificate file operators and agents trust, when the server issued its own certificate. */
  caFile: string | undefined;
  /** The root admin token when this start created it (print it once; never log it). */
  adminToken: string | undefined;
  /** The composed control plane (for what runs beside the server in its process: `--simulate`). */
  compute: Compute;
  /** Graceful stop: stop accepting and claiming, finish in-flight work, release leases, close. */
  stop(): Promise<void>;
}

function listen(server: ServerType, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => reject(error);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** How long requests in flight on a closing listener get before their connections are cut. */
const CLOSE_GRACE_MS = 2_000;

// An agent that re-polls at once keeps its keep-alive connection busy, so `close()` alone would wait for it forever:
// idle connections are closed as they become idle, and whatever is still open after the grace is cut.
function closeServer(server: ServerType | undefined): Promise<void> {
  if (!server) return Promise.resolve();
  const node = server as Server;
  return new Promise((resolve) => {
    const idle = setInterval(() => node.closeIdleConnections?.(), 100);
    const cut = setTimeout(() => node.closeAllConnections?.(), CLOSE_GRACE_MS);
    server.close(() => {
      clearInterval(idle);
      clearTimeout(cut);
      resolve();
    });
    node.closeIdleConnections?.();
  });
}

/**
 * Node's own limits on receiving a request, for both ports: a client that has not sent its whole request (headers and
 * body) within REQUEST_TIMEOUT_MS is answered 408 and cut off (the headers by then too, Node's default being
 * `min(60 s, requestTimeout)`), checked every second rather than Node's default 30 s. A long poll or an event stream
 * is not affected: the limit ends once the request has arrived. A connection that has not finished its TLS handshake
 * within the same limit (at most 10 s) is closed: Node's default of 120 s lets idle sockets pile up.
 */
const receiveLimits = (config: ServerConfig) => ({
  requestTimeout: config.requestTimeoutMs,
  connectionsCheckingInterval: Math.min(1_000, config.requestTimeoutMs),
  handshakeTimeout: Math.min(10_000, config.requestTimeoutMs),
});

const displayHost = (host: string) => (host === '0.0.0.0' || host === '::' ? 'localhost' : host);

/**
 * Starts one server process of `config.role`: composes and migrates, makes sure the root admin exists (API roles),
 * loads the TLS material, serves the operator API on PORT and the agent API on AGENT_PORT (api, all), starts WORKERS
 * workers (worker, all; the worker role serves only /healthz, /readyz and /metrics on PORT).
 *
 * @example
 * ```ts
 * const server = await startServer(loadConfig(process.env, []), createLogger('info'));
 * await server.stop();
 * ```
 */
export async function startServer(config: ServerConfig, log: ServerLogger): Promise<RunningServer> {
  const { compute, security, key, database } = await composeCompute(config, log);
  const servesApi = config.role !== 'worker';
  const runsWorkers = config.role !== 'api';
  const metrics = createMetrics(database);
  let stopping = false;
  let workers: RunningWorker[] = [];
  let operator: ServerType | undefined;
  let agent: ServerType | undefined;
  let agentApi: ReturnType<typeof createAgentApi> | undefined;
  const events = createEventStreams({
    compute,
    log,
    heartbeatMs: config.sseHeartbeatMs,
    pollMs: config.ssePollMs,
  });

  try {
    const admin = servesApi ? await ensureRootAdmin(database, config.adminToken) : {};
    const tls = await loadTlsMaterial(database, config, key);
    const migrations = (await database.query<{ n: string }>('SELECT count(*) AS n FROM schema_migrations')).rows[0]?.n;
    const readiness: Record<string, ReadinessCheck> = {
      shutdown: async () => (stopping ? 'shutting down' : true),
      database: async () => {
        await database.query('SELECT 1');
        return true;
      },
      migrations: async () => {
        const { rows } = await database.query<{ n: string }>('SELECT count(*) AS n FROM schema_migrations');
        return rows[0]?.n === migrations ? true : 'the schema changed since this process started';
      },
    };
    if (runsWorkers) {
      readiness.leases = async () => {
        const { rows } = await database.query<{ n: string }>(
          'SELECT count(*) AS n FROM shard_leases WHERE worker_id = ANY($1::text[]) AND expires_at > $2',
          [workers.map((worker) => worker.id), new Date()],
        );
        return Number(rows[0]?.n ?? 0) > 0 ? true : 'no shard lease held yet';
      };
    }

    const app = createHttpApp({
      config,
      log,
      metrics,
      readiness,
      ...(servesApi ? { api: { compute, events } } : {}),
    });
    const operatorTls = config.tls.enabled;
    operator = createAdaptorServer({
      fetch: app.fetch,
      ...(operatorTls
        ? { createServer: createHttpsServer, serverOptions: { ...receiveLimits(config), cert: tls.cert, key: tls.key } }
        : { serverOptions: receiveLimits(config) }),
    });
    const port = await listen(operator, config.port, config.host);
    let agentPort: number | undefined;
    if (servesApi) {
      agentApi = createAgentApi({ compute, pki: security, log: compute.context.log });
      agent = createHttpsServer(
        {
          ...receiveLimits(config),
          cert: tls.cert,
          key: tls.key,
          ca: tls.agentCa,
          requestCert: true,
          rejectUnauthorized: false,
        },
        createAgentRequestListener({ agentApi, log, metrics }),
      );
      agentPort = await listen(agent, config.agentPort, config.host);
    }
    if (runsWorkers) {
      workers = await compute.startWorkers(config.workers);
      metrics.setWorkerIds(workers.map((worker) => worker.id));
    }

    const host = displayHost(config.host);
    const apiUrl = `${operatorTls ? 'https' : 'http'}://${host}:${port}`;
    const agentUrl = agentPort === undefined ? undefined : `https://${host}:${agentPort}`;
    log.info(
      {
        role: config.role,
        port,
        agentPort,
        workers: workers.length,
        database: config.databaseUrl ? 'postgres' : 'pglite',
        tls: tls.source,
      },
      'started',
    );

    return {
      apiUrl,
      agentUrl,
      caFile: tls.caFile,
      adminToken: admin.token,
      compute,
      async stop() {
        stopping = true;
        // Stop accepting: the listeners close; open streams and held polls are answered so their connections end.
        const closed = Promise.all([closeServer(operator), closeServer(agent)]);
        await events.closeAll();
        await agentApi?.close();
        // Stop claiming: each worker finishes the pass in flight and releases its leases.
        await Promise.all(workers.map((worker) => worker.stop()));
        await closed;
        await compute.close();
        await database.close();
      },
    };
  } catch (error) {
    await Promise.all([closeServer(operator), closeServer(agent)]);
    await agentApi?.close().catch(() => undefined);
    await Promise.all(workers.map((worker) => worker.stop().catch(() => undefined)));
    await compute.close().catch(() => undefined);
    await database.close().catch(() => undefined);
    throw error;
  }
}
