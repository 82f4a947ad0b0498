import { X509Certificate } from 'node:crypto';
import type { TLSSocket } from 'node:tls';
import type { AgentApi } from '@better-compute/pki/agent-api';
import type { HttpBindings } from '@hono/node-server';
import { Hono } from 'hono';
import { requestId } from 'hono/request-id';
import type { ServerLogger } from './logger';
import type { ServerMetrics } from './metrics';

type Env = { Bindings: HttpBindings; Variables: { requestId: string } };

const METHOD_PATH = /^\/agent\/v1\/[a-zA-Z][a-zA-Z0-9.]{0,63}$/;

// The PEM of each TLS 1.3 connection's client certificate, read once: TLS 1.3 has no renegotiation, so the certificate
// of the handshake is the connection's for its life, and every request of a keep-alive connection (an agent's polls,
// acks, starts and completions) would otherwise copy and re-encode it.
const pemBySocket = new WeakMap<object, string | undefined>();

/** The client certificate the TLS socket received, as PEM; undefined when the agent sent none. */
export function peerCertificatePem(socket: unknown): string | undefined {
  const tls = socket as Partial<TLSSocket> | undefined;
  if (typeof tls?.getPeerCertificate !== 'function') return undefined;
  const stable = typeof tls.getProtocol === 'function' && tls.getProtocol() === 'TLSv1.3';
  if (stable && pemBySocket.has(tls)) return pemBySocket.get(tls);
  let pem: string | undefined;
  try {
    const raw = tls.getPeerCertificate(false)?.raw;
    pem = raw && raw.length > 0 ? new X509Certificate(raw).toString() : undefined;
  } catch {
    // An unreadable certificate is the same as none: the agent API refuses the call.
    pem = undefined;
  }
  if (stable) pemBySocket.set(tls, pem);
  return pem;
}

/**
 * The agent port's app: every request is handed to pki's agent API with the client certificate the TLS server
 * requested (not required: `join` comes without one; the agent API decides). Requests are logged with their id,
 * method path and status, and measured like the operator API's; nothing of their bodies.
 *
 * @example
 * ```ts
 * serve({ fetch: createAgentApp({ agentApi, log, metrics }).fetch, createServer: https.createServer, serverOptions });
 * ```
 */
export function createAgentApp(options: { agentApi: AgentApi; log: ServerLogger; metrics: ServerMetrics }): Hono<Env> {
  const { agentApi, log, metrics } = options;
  const app = new Hono<Env>();
  app.use(requestId({ limitLength: 128 }));
  app.use(async (c, next) => {
    const started = process.hrtime.bigint();
    await next();
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const route = METHOD_PATH.test(c.req.path) ? c.req.path : '/agent/v1/{unknown}';
    metrics.observeRequest(route, c.req.method, c.res.status, seconds);
    log.info(
      {
        reqId: c.get('requestId'),
        port: 'agent',
        method: c.req.method,
        route,
        status: c.res.status,
        ms: Math.round(seconds * 1000),
      },
      'request',
    );
  });
  app.all('*', (c) => agentApi.handle(c.req.raw, { certificatePem: peerCertificatePem(c.env.incoming.socket) }));
  return app;
}
