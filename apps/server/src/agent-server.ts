import { randomUUID, X509Certificate } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { bodyTooLargeError, malformedBodyError, parseJsonBody } from '@better-compute/core/kernel';
import type { AgentAnswer, AgentApi } from '@better-compute/pki/agent-api';
import type { ServerLogger } from './logger';
import type { ServerMetrics } from './metrics';

const METHOD_PATH = /^\/agent\/v1\/[a-zA-Z][a-zA-Z0-9.]{0,63}$/;
// A request id the client sent is kept when it is short and plain (it ends up in log lines and a response header).
const CLIENT_REQUEST_ID = /^[\w\-=]{1,128}$/;

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
 * Reads a request's JSON body from Node's stream: at most `limit` bytes (the declared length first, then what
 * arrives); a client that goes away or breaks its chunked encoding mid-body sent no complete JSON (INVALID_INPUT
 * `malformed-json`). `tooLarge` is told when the body is refused for its size, so the connection is not kept.
 */
function readIncomingJson(request: IncomingMessage, limit: number, tooLarge: () => void): Promise<unknown> {
  const declared = request.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    tooLarge();
    return Promise.reject(bodyTooLargeError(limit));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const settle = (error: unknown, value?: unknown) => {
      request.off('data', onData).off('end', onEnd).off('error', onBroken).off('close', onClose);
      if (error) reject(error);
      else resolve(value);
    };
    const onData = (chunk: Buffer) => {
      total += chunk.byteLength;
      if (total > limit) {
        tooLarge();
        settle(bodyTooLargeError(limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      try {
        settle(undefined, parseJsonBody(Buffer.concat(chunks, total)));
      } catch (error) {
        settle(error);
      }
    };
    const onBroken = () => settle(malformedBodyError('the request body ended before it was complete'));
    const onClose = () => {
      if (!request.complete) onBroken();
    };
    request.on('data', onData).on('end', onEnd).on('error', onBroken).on('close', onClose);
  });
}

function write(response: ServerResponse, answer: AgentAnswer, requestId: string, close: boolean): void {
  if (response.headersSent || response.destroyed) return;
  response.writeHead(answer.status, {
    ...answer.headers,
    'content-length': Buffer.byteLength(answer.body),
    'x-request-id': requestId,
    ...(close ? { connection: 'close' } : {}),
  });
  response.end(answer.body);
}

/**
 * The agent port's request listener, for Node's `https.createServer`: every request is handed to pki's agent API as
 * plain data (`agentApi.answer`) with the client certificate the TLS server requested (not required: `join` comes
 * without one; the agent API decides), and its answer written back. No fetch `Request`, `Response` or router per
 * request: at a thousand agents each holding a poll, those objects were most of the server's heap per agent and a
 * good part of its CPU. Requests are logged with their id (the client's `x-request-id` when it is plain, else a new
 * one; echoed in the answer), method path and status, and measured like the operator API's; nothing of their bodies.
 * A body refused for its size also ends the connection, so the rest of it is not read.
 *
 * @example
 * ```ts
 * https.createServer({ key, cert, ca, requestCert: true, rejectUnauthorized: false },
 *   createAgentRequestListener({ agentApi, log, metrics }));
 * ```
 */
export function createAgentRequestListener(options: {
  agentApi: AgentApi;
  log: ServerLogger;
  metrics: ServerMetrics;
}): (request: IncomingMessage, response: ServerResponse) => void {
  const { agentApi, log, metrics } = options;

  async function serve(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const started = process.hrtime.bigint();
    const given = request.headers['x-request-id'];
    const requestId = typeof given === 'string' && CLIENT_REQUEST_ID.test(given) ? given : randomUUID();
    const url = request.url ?? '';
    const query = url.indexOf('?');
    const path = query === -1 ? url : url.slice(0, query);
    const gone = new AbortController();
    response.once('close', () => {
      if (!response.writableFinished) gone.abort();
    });
    let close = false;
    let status = 500;
    try {
      const answer = await agentApi.answer(
        {
          method: request.method ?? '',
          path,
          readJson: (limit) =>
            readIncomingJson(request, limit, () => {
              close = true;
            }),
          signal: gone.signal,
        },
        { certificatePem: peerCertificatePem(request.socket) },
      );
      status = answer.status;
      write(response, answer, requestId, close);
    } catch (error) {
      // answer() never throws; a write that does (a header Node refuses) must still not take the process down.
      log.error({ reqId: requestId, err: error instanceof Error ? error.name : 'unknown' }, 'unhandled error');
      status = 500;
      if (!response.headersSent && !response.destroyed) {
        response.writeHead(500, { 'content-type': 'application/json; charset=utf-8', 'x-request-id': requestId });
        response.end(JSON.stringify({ code: 'INTERNAL', message: 'internal error', details: {} }));
      } else response.destroy();
    }
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const route = METHOD_PATH.test(path) ? path : '/agent/v1/{unknown}';
    metrics.observeRequest(route, request.method ?? '', status, seconds);
    log.info(
      { reqId: requestId, port: 'agent', method: request.method, route, status, ms: Math.round(seconds * 1000) },
      'request',
    );
  }

  return (request, response) => {
    void serve(request, response);
  };
}
