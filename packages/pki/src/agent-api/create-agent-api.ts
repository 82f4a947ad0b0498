import { type Clock, type Compute, ComputeError, isComputeError, type Logger } from '@better-compute/core';
import { readJsonBody } from '@better-compute/core/kernel';
import type { Pki } from '../pki';
import { type CheckedCertificates, createCheckedCertificates } from './checked-certificates';
import { COMMAND_METHODS } from './command-methods';
import { createCommandWaiters } from './command-waiters';
import type { AgentApiContext, AgentCaller, AgentMethod } from './context';
import { type AgentAnswer, DEFAULT_AGENT_MAX_BODY_BYTES, errorAnswer, jsonAnswer } from './http';
import { NODE_METHODS } from './node-methods';
import { createSessionKeeper } from './session-keeper';

/**
 * Where the agent API's methods live: `POST /agent/v1/<method>`.
 *
 * @example
 * ```ts
 * const url = `https://cp:8443${AGENT_API_BASE_PATH}/commands.poll`;
 * ```
 */
export const AGENT_API_BASE_PATH = '/agent/v1';
/**
 * The default bound of a long poll (`longPollMaxMs`).
 *
 * @example
 * ```ts
 * createAgentApi({ compute, pki: security, longPollMaxMs: DEFAULT_LONG_POLL_MAX_MS });
 * ```
 */
export const DEFAULT_LONG_POLL_MAX_MS = 25_000;
/**
 * The largest `longPollMaxMs` accepted.
 *
 * @example
 * ```ts
 * createAgentApi({ compute, pki: security, longPollMaxMs: MAX_LONG_POLL_MAX_MS });
 * ```
 */
export const MAX_LONG_POLL_MAX_MS = 60_000;
/**
 * How often a waiting long poll re-checks the queue without a notification, by default.
 *
 * @example
 * ```ts
 * createAgentApi({ compute, pki: security, recheckMs: DEFAULT_LONG_POLL_RECHECK_MS * 2 });
 * ```
 */
export const DEFAULT_LONG_POLL_RECHECK_MS = 15_000;

/** Options of {@link createAgentApi}. */
export interface AgentApiOptions {
  /** The kernel: its database, command queue and events. */
  compute: Compute;
  /** The PKI whose CA signs and checks agent certificates (`pki({ key })`). */
  pki: Pki;
  /** Stamps sessions, inventory reports and spec reports. Default: the kernel's clock. */
  clock?: Clock;
  /** Default: the kernel's logger. No line carries a token, key, certificate or secret value. */
  log?: Logger;
  /** The longest a `commands.poll` is held (1 to 60,000 ms; default 25,000). */
  longPollMaxMs?: number;
  /** How often a held poll re-checks without a notification (default 15,000 ms). */
  recheckMs?: number;
  /** Bodies larger than this are INVALID_INPUT (default 1 MiB). */
  maxBodyBytes?: number;
}

/** The peer of one request, as the TLS server saw it: the client certificate's PEM, when it sent one. */
export interface AgentPeer {
  certificatePem?: string;
}

/**
 * One request to the agent API as a transport hands it over without building a fetch `Request`: the HTTP method, the
 * URL's path, a reader of its JSON body and a signal aborted when the client goes away.
 */
export interface AgentRequest {
  /** The HTTP method (`POST` for every method). */
  method: string;
  /** The URL's path, without the query: `/agent/v1/commands.poll`. */
  path: string;
  /**
   * Reads the body, at most `limit` bytes, and parses it as core's `parseJsonBody` does. Too large is core's
   * `bodyTooLargeError(limit)`, cut short or not JSON `malformedBodyError()`. Called once, after the certificate check.
   */
  readJson(limit: number): Promise<unknown>;
  /** Aborted when the client goes away (a held poll then stops waiting). */
  signal: AbortSignal;
}

/** What {@link createAgentApi} returns. */
export interface AgentApi {
  /** Answers one fetch `Request`; never throws (errors are `{ code, message, details }` answers). */
  handle(request: Request, peer: AgentPeer): Promise<Response>;
  /**
   * Answers one request as plain data, for a server that reads and writes Node's own request objects (fewer objects
   * per request than a fetch `Request` and `Response`); never throws.
   */
  answer(request: AgentRequest, peer: AgentPeer): Promise<AgentAnswer>;
  /** How many long polls are waiting now. */
  waiting(): number;
  /** Stops listening and answers every held poll at once. */
  close(): Promise<void>;
}

const METHODS: Readonly<Record<string, AgentMethod>> = { ...NODE_METHODS, ...COMMAND_METHODS };

function positiveInteger(value: number | undefined, fallback: number, max: number, path: string): number {
  const chosen = value ?? fallback;
  if (!Number.isSafeInteger(chosen) || chosen < 1 || chosen > max) {
    throw new ComputeError('INVALID_CONFIG', `${path} must be an integer from 1 to ${max}`, {
      details: { path: [path] },
    });
  }
  return chosen;
}

function unauthenticated(message: string, reason: 'certificate-missing' | 'certificate-malformed'): ComputeError {
  return new ComputeError('UNAUTHENTICATED', message, { details: { path: ['certificate'], reason } });
}

async function authenticate(certificates: CheckedCertificates, peer: AgentPeer): Promise<AgentCaller> {
  const pem = peer?.certificatePem;
  if (typeof pem !== 'string' || pem.trim() === '') {
    throw unauthenticated('this method needs a client certificate', 'certificate-missing');
  }
  try {
    const verified = await certificates.verify(pem);
    return { ...verified, certificatePem: pem };
  } catch (error) {
    if (isComputeError(error, 'UNAUTHENTICATED')) throw error;
    if (isComputeError(error, 'INVALID_INPUT'))
      throw unauthenticated('the client certificate is not readable', 'certificate-malformed');
    throw error;
  }
}

/**
 * The agent API as a transport-independent handler: `POST /agent/v1/<method>` with a JSON body answers 200 with JSON.
 * `join` needs no certificate; every other method needs a client certificate `pki.verifyAgentCertificate` accepts
 * (none is 401 UNAUTHENTICATED `certificate-missing`; another CA's, an expired, revoked or superseded one is 401 with
 * pki's `details.reason`), and acts only as the node the certificate names. A certificate's check is remembered
 * while its agent calls (no statement per call): a revocation, by this server or another, is refused once its NOTIFY
 * arrives, and a remembered check is redone after 60 s in any case (`createCheckedCertificates`). Errors answer `{ code, message, details }`
 * with core's `HTTP_STATUS_BY_CODE`: an unknown method 404, another HTTP method 405, a malformed, mistyped or too large
 * body 400 INVALID_INPUT with `details.path`. Any authenticated call touches the node's open session (at most every
 * 15 s). `commands.poll` holds the request up to `min(waitMs, longPollMaxMs)` and answers as soon as a command for the
 * node is enqueued (LISTEN on `bc_commands`, re-checking every `recheckMs` regardless). The server terminating TLS
 * passes the client certificate it saw (requested, not required) as `peer.certificatePem`.
 *
 * @example
 * ```ts
 * import { createAgentApi } from '@better-compute/pki/agent-api';
 *
 * const agentApi = createAgentApi({ compute, pki: security });
 * https.createServer({ key, cert, requestCert: true, rejectUnauthorized: false }, async (req, res) => {
 *   const raw = (req.socket as TLSSocket).getPeerCertificate().raw;
 *   const certificatePem = raw ? new X509Certificate(raw).toString() : undefined;
 *   const response = await agentApi.handle(toRequest(req), { certificatePem });
 *   // … write response to res
 * });
 * ```
 */
export function createAgentApi(options: AgentApiOptions): AgentApi {
  if (typeof options !== 'object' || options === null || !options.compute || !options.pki) {
    throw new ComputeError('INVALID_CONFIG', 'createAgentApi takes { compute, pki }', { details: { path: [] } });
  }
  const { compute } = options;
  const clock = options.clock ?? compute.context.clock;
  const log = options.log ?? compute.context.log;
  const longPollMaxMs = positiveInteger(
    options.longPollMaxMs,
    DEFAULT_LONG_POLL_MAX_MS,
    MAX_LONG_POLL_MAX_MS,
    'longPollMaxMs',
  );
  const recheckMs = positiveInteger(options.recheckMs, DEFAULT_LONG_POLL_RECHECK_MS, 3_600_000, 'recheckMs');
  const limit = positiveInteger(options.maxBodyBytes, DEFAULT_AGENT_MAX_BODY_BYTES, 2 ** 31 - 1, 'maxBodyBytes');
  const waiters = createCommandWaiters(compute.database, log);
  const certificates = createCheckedCertificates(
    compute.database,
    (pem) => options.pki.verifyAgentCertificate(compute.database, pem),
    clock,
    log,
  );
  const ctx: AgentApiContext = {
    compute,
    pki: options.pki,
    clock,
    log,
    longPollMaxMs,
    recheckMs,
    waiters,
    sessions: createSessionKeeper(compute.database, clock, log),
  };

  async function answer(request: AgentRequest, peer: AgentPeer): Promise<AgentAnswer> {
    try {
      const { path } = request;
      const name = path.startsWith(`${AGENT_API_BASE_PATH}/`) ? path.slice(AGENT_API_BASE_PATH.length + 1) : '';
      const method = Object.hasOwn(METHODS, name) ? METHODS[name] : undefined;
      if (!method) {
        return errorAnswer(
          new ComputeError('NOT_FOUND', 'no such agent API method', { details: { path: ['method'] } }),
        );
      }
      if (request.method !== 'POST') {
        const notAllowed = new ComputeError('INVALID_INPUT', 'agent API methods are called with POST', {
          details: { path: [], reason: 'method-not-allowed', allow: ['POST'] },
        });
        return errorAnswer(notAllowed, { allow: 'POST' }, 405);
      }
      // The certificate is checked before the body is read.
      if (method.authenticated) await certificates.listen();
      const caller = method.authenticated ? await authenticate(certificates, peer) : undefined;
      const body = await request.readJson(limit);
      if (caller && !name.startsWith('sessions.')) await ctx.sessions.touch(caller.nodeId);
      const result = await method.run(ctx, { body, caller, signal: request.signal });
      return jsonAnswer(200, result);
    } catch (error) {
      if (!isComputeError(error)) {
        log.error('agent API: a call failed', { error: error instanceof Error ? error.message : String(error) });
      }
      return errorAnswer(error);
    }
  }

  async function handle(request: Request, peer: AgentPeer): Promise<Response> {
    let path: string;
    try {
      path = new URL(request.url).pathname;
    } catch {
      path = '';
    }
    const answered = await answer(
      {
        method: request.method,
        path,
        readJson: (bodyLimit) => readJsonBody(request, bodyLimit),
        signal: request.signal,
      },
      peer,
    );
    return new Response(answered.body, { status: answered.status, headers: answered.headers });
  }

  return {
    handle,
    answer,
    waiting: () => waiters.count(),
    close: async () => {
      await Promise.all([waiters.close(), certificates.close()]);
    },
  };
}
