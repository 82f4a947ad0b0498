import { randomUUID } from 'node:crypto';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { ComputeError, type ComputeErrorCode, isComputeErrorCode, type Json } from '@better-compute/core';
import { generateSigningKeyPair, type SigningKeyPair, signToBase64Url } from '@better-compute/pki';
import type { AgentCommand } from '@better-compute/pki/agent-api';
import { encodeResult } from './result-bytes';

/** Options of {@link createHttpAgent}. */
export interface HttpAgentOptions {
  /** The agent API's origin, e.g. `https://127.0.0.1:8443` (methods are `POST <baseUrl>/agent/v1/<method>`). */
  baseUrl: string;
  /** The PEM certificate(s) the server's TLS certificate must chain to. */
  ca: string;
  /** The TLS server name to verify, when it differs from the URL's host. */
  servername?: string;
  /** The key pair the agent generates at join: `es256` (ECDSA P-256, the default) or `ed25519`. */
  keyAlgorithm?: 'es256' | 'ed25519';
  /** How long a request may take beyond the long poll it asks for (default 30 s). */
  requestTimeoutMs?: number;
}

/** What a join or a renewal answers. */
export interface HttpAgentCertificate {
  nodeId: string;
  tenantId: string;
  siteId: string | null;
  role: string;
  serial: string;
  certificatePem: string;
  caCertificatePem: string;
  expiresAt: string;
}

/** A session the agent opened. */
export interface HttpAgentSession {
  sessionId: string;
  nodeId: string;
  role: string;
  bootId: string;
  connectedAt: string;
}

/** How a command was completed: its result (bytes, or JSON encoded as UTF-8 JSON) and whether to sign it. */
export interface HttpAgentCompletion {
  result?: Uint8Array | Json;
  /** Sign the result bytes with the agent's key and send the `attested` claim (needs a result). */
  sign?: boolean;
}

/** An agent speaking the agent API over HTTPS with its client certificate (mutual TLS). */
export interface HttpAgent {
  readonly nodeId: string | undefined;
  readonly certificate: HttpAgentCertificate | undefined;
  readonly session: HttpAgentSession | undefined;
  /** Generates a key pair, joins with the token (and hardware claims), and keeps the key and the certificate. */
  join(token: string, claims?: Record<string, string>): Promise<HttpAgentCertificate>;
  /** Opens a session (a fresh boot id unless given). */
  openSession(role: string, bootId?: string): Promise<HttpAgentSession>;
  closeSession(): Promise<boolean>;
  /** Polls its commands, holding up to `waitMs` (bounded by the server) when there are none. */
  poll(options?: { waitMs?: number; limit?: number }): Promise<AgentCommand[]>;
  ack(commandId: string): Promise<void>;
  start(commandId: string): Promise<void>;
  complete(commandId: string, completion?: HttpAgentCompletion): Promise<void>;
  fail(commandId: string, reason: string): Promise<void>;
  reject(commandId: string, reason: string): Promise<void>;
  /** A secret a live command of this agent carries. */
  fetchSecret(ref: string, commandId?: string): Promise<string>;
  reportInventory(inventory: Record<string, Json>): Promise<void>;
  getSpec(): Promise<{ spec: Record<string, Json>; generation: number; observedGeneration: number }>;
  reportObservedGeneration(observedGeneration: number): Promise<void>;
  /** Renews its certificate (with a new key pair when `rekey`), and uses the new one from then on. */
  renew(options?: { rekey?: boolean }): Promise<HttpAgentCertificate>;
  /** Closes its session when one is open, and its connections. */
  close(): Promise<void>;
}

function failure(status: number, body: unknown): ComputeError {
  const answer = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
  const code: ComputeErrorCode = isComputeErrorCode(answer.code) ? answer.code : 'INTERNAL';
  const message = typeof answer.message === 'string' ? answer.message : `the agent API answered ${status}`;
  const details = typeof answer.details === 'object' && answer.details !== null ? answer.details : {};
  return new ComputeError(code, message, { details: { ...details, status } as never });
}

/**
 * A client of the agent API over real HTTPS, as a node agent speaks it: it joins (a fresh key pair, the certificate
 * kept), then calls every method with its client certificate. An error answer is thrown as a ComputeError with the
 * server's code and details (plus `details.status`).
 *
 * @example
 * ```ts
 * const agent = createHttpAgent({ baseUrl: 'https://127.0.0.1:8443', ca: serverCaPem });
 * await agent.join(token, { serial: 'SN-1' });
 * await agent.openSession('ramdisk');
 * for (const command of await agent.poll({ waitMs: 20_000 })) {
 *   await agent.ack(command.id);
 *   await agent.start(command.id);
 *   await agent.complete(command.id, { result: { ok: true }, sign: true });
 * }
 * await agent.close();
 * ```
 */
export function createHttpAgent(options: HttpAgentOptions): HttpAgent {
  const base = new URL(options.baseUrl);
  const timeoutMs = options.requestTimeoutMs ?? 30_000;
  let key: SigningKeyPair | undefined;
  let certificate: HttpAgentCertificate | undefined;
  let session: HttpAgentSession | undefined;
  let tls = makeAgent();

  function makeAgent(): HttpsAgent {
    return new HttpsAgent({
      keepAlive: true,
      ca: options.ca,
      ...(options.servername ? { servername: options.servername } : {}),
      ...(key && certificate ? { key: key.privateKeyPem, cert: certificate.certificatePem } : {}),
    });
  }

  function useIdentity(nextKey: SigningKeyPair, next: HttpAgentCertificate): void {
    key = nextKey;
    certificate = next;
    tls.destroy();
    tls = makeAgent();
  }

  function call<T>(method: string, body: unknown = {}, waitMs = 0): Promise<T> {
    const text = JSON.stringify(body);
    const url = new URL(`agent/v1/${method}`, base.href.endsWith('/') ? base : `${base.href}/`);
    return new Promise<T>((resolve, reject) => {
      const request = httpsRequest(
        url,
        {
          method: 'POST',
          agent: tls,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) },
          timeout: timeoutMs + waitMs,
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('error', reject);
          response.on('end', () => {
            let parsed: unknown;
            try {
              parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
            } catch {
              parsed = undefined;
            }
            if (response.statusCode === 200) resolve(parsed as T);
            else reject(failure(response.statusCode ?? 0, parsed));
          });
        },
      );
      request.on('timeout', () => request.destroy(new ComputeError('TIMEOUT', `${method} took too long`)));
      request.on('error', reject);
      request.end(text);
    });
  }

  function requireJoined(): { key: SigningKeyPair; certificate: HttpAgentCertificate } {
    if (!key || !certificate) throw new ComputeError('INVALID_STATE', 'the agent has not joined');
    return { key, certificate };
  }

  const agent: HttpAgent = {
    get nodeId() {
      return certificate?.nodeId;
    },
    get certificate() {
      return certificate ? { ...certificate } : undefined;
    },
    get session() {
      return session ? { ...session } : undefined;
    },
    async join(token, claims) {
      const nextKey = generateSigningKeyPair(options.keyAlgorithm ?? 'es256');
      const joined = await call<HttpAgentCertificate>('join', {
        token,
        publicKey: nextKey.publicJwk,
        ...(claims ? { claims } : {}),
      });
      useIdentity(nextKey, joined);
      return { ...joined };
    },
    async openSession(role, bootId = randomUUID()) {
      session = await call<HttpAgentSession>('sessions.open', { role, bootId });
      return { ...session };
    },
    async closeSession() {
      session = undefined;
      return (await call<{ closed: boolean }>('sessions.close')).closed;
    },
    async poll(pollOptions = {}) {
      const waitMs = pollOptions.waitMs ?? 0;
      const body = { waitMs, ...(pollOptions.limit === undefined ? {} : { limit: pollOptions.limit }) };
      return (await call<{ commands: AgentCommand[] }>('commands.poll', body, waitMs)).commands;
    },
    async ack(commandId) {
      await call('commands.ack', { commandId });
    },
    async start(commandId) {
      await call('commands.start', { commandId });
    },
    async complete(commandId, completion = {}) {
      const bytes = completion.result === undefined ? undefined : encodeResult(completion.result);
      let attested: Record<string, string> | undefined;
      if (completion.sign) {
        const identity = requireJoined();
        if (!bytes) throw new ComputeError('INVALID_INPUT', 'a signed completion needs a result');
        attested = {
          alg: identity.key.alg,
          signature: signToBase64Url(identity.key.privateKeyPem, bytes),
          certificateSerial: identity.certificate.serial,
        };
      }
      await call('commands.complete', {
        commandId,
        ...(bytes ? { result: Buffer.from(bytes).toString('base64') } : {}),
        ...(attested ? { attested } : {}),
      });
    },
    async fail(commandId, reason) {
      await call('commands.fail', { commandId, reason });
    },
    async reject(commandId, reason) {
      await call('commands.reject', { commandId, reason });
    },
    async fetchSecret(ref, commandId) {
      return (await call<{ value: string }>('secrets.fetch', { ref, ...(commandId ? { commandId } : {}) })).value;
    },
    async reportInventory(inventory) {
      await call('inventory.report', { inventory });
    },
    getSpec() {
      return call('spec.get');
    },
    async reportObservedGeneration(observedGeneration) {
      await call('spec.report', { observedGeneration });
    },
    async renew(renewOptions = {}) {
      const current = requireJoined();
      const nextKey = renewOptions.rekey ? generateSigningKeyPair(options.keyAlgorithm ?? 'es256') : current.key;
      const renewed = await call<HttpAgentCertificate>(
        'certificates.renew',
        renewOptions.rekey ? { publicKey: nextKey.publicJwk } : {},
      );
      useIdentity(nextKey, renewed);
      return { ...renewed };
    },
    async close() {
      try {
        if (session) await agent.closeSession();
      } finally {
        tls.destroy();
      }
    },
  };
  return agent;
}
