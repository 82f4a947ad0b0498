import { X509Certificate } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import { type AddressInfo, isIP } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Compute } from '@better-compute/core';
import { issueServerCertificate, type Pki } from '@better-compute/pki';
import { type AgentApi, type AgentApiOptions, createAgentApi } from '@better-compute/pki/agent-api';

/** What {@link serveAgentApi} takes. */
export interface ServeAgentApiOptions {
  compute: Compute;
  /** The pki the compute is wired with. */
  pki: Pki;
  /** The pki's 32-byte at-rest key: the server certificate is issued by the control plane's CA, sealed under it. */
  key: Uint8Array;
  /** Default 127.0.0.1, on a free port. */
  host?: string;
  port?: number;
  /** The agent API's own options (long-poll bound, re-check interval). */
  agentApi?: Omit<AgentApiOptions, 'compute' | 'pki'>;
}

/** A running agent API over HTTPS (see {@link serveAgentApi}). */
export interface ServedAgentApi {
  /** `https://127.0.0.1:<port>` */
  readonly url: string;
  /** The control plane's CA certificate (PEM): what agents trust. */
  readonly ca: string;
  readonly agentApi: AgentApi;
  /** Answers the held polls, closes every connection and the listener. */
  close(): Promise<void>;
}

async function answer(agentApi: AgentApi, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const aborted = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) aborted.abort();
  });
  const raw = (req.socket as TLSSocket).getPeerCertificate()?.raw;
  const certificatePem = raw ? new X509Certificate(raw).toString() : undefined;
  const request = new Request(`https://${req.headers.host ?? '127.0.0.1'}${req.url}`, {
    method: req.method ?? 'POST',
    headers: req.headers as Record<string, string>,
    ...(req.method === 'POST' ? { body: Buffer.concat(chunks) } : {}),
    signal: aborted.signal,
  });
  const response = await agentApi.handle(request, certificatePem ? { certificatePem } : {});
  res.writeHead(response.status, Object.fromEntries(response.headers));
  res.end(Buffer.from(await response.arrayBuffer()));
}

/**
 * Serves `createAgentApi` over HTTPS as apps/server does, for end-to-end tests: a server certificate the control
 * plane's CA issues (for `localhost` and the host), client certificates requested (not required: `join` needs none)
 * and handed to the agent API, which checks them. Point `createHttpAgent` or `createHttpSimSite` at `url` with `ca`.
 *
 * @example
 * ```ts
 * const served = await serveAgentApi({ compute, pki: security, key });
 * const site = await createHttpSimSite({ agentUrl: served.url, ca: served.ca, siteJoinToken, machines: 3 });
 * await site.close();
 * await served.close();
 * ```
 */
export async function serveAgentApi(options: ServeAgentApiOptions): Promise<ServedAgentApi> {
  const host = options.host ?? '127.0.0.1';
  const { compute } = options;
  const tls = await issueServerCertificate(
    compute.database,
    { hostnames: ['localhost'], ...(isIP(host) === 0 ? {} : { ips: [host] }) },
    { key: options.key, clock: compute.context.clock },
  );
  const agentApi = createAgentApi({ ...options.agentApi, compute, pki: options.pki });
  const server = createServer(
    { cert: tls.certificatePem, key: tls.privateKeyPem, requestCert: true, rejectUnauthorized: false },
    (req, res) => {
      answer(agentApi, req, res).catch((error: unknown) => res.destroy(error as Error));
    },
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://${host.includes(':') ? `[${host}]` : host}:${port}`,
    ca: tls.caCertificatePem,
    agentApi,
    async close() {
      await agentApi.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
