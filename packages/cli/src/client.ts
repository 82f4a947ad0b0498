import type { IncomingMessage } from 'node:http';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Connection } from './config';
import { CliError } from './errors';

/** The API major versions this CLI speaks (the OpenAPI document's `info.version`). */
export const SUPPORTED_API_VERSIONS: readonly string[] = ['1'];

const NETWORK_CODES: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host name lookup failed',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ETIMEDOUT: 'timed out',
  EPIPE: 'connection closed',
};

function networkError(url: string, error: NodeJS.ErrnoException): CliError {
  const code = error.code ?? '';
  const tls =
    /CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|ERR_TLS|SSL|HOSTNAME|ALTNAME/.test(code) ||
    /certificate|ssl/i.test(error.message);
  if (tls) {
    return new CliError(
      'UNREACHABLE',
      `cannot verify the server's certificate at ${url} (${code || error.message}): pass --ca <file> (or set BETTER_COMPUTE_CA) with the server's CA, e.g. data/tls/ca.crt`,
      { details: { reason: 'tls' } },
    );
  }
  return new CliError(
    'UNREACHABLE',
    `cannot reach the server at ${url} (${NETWORK_CODES[code] ?? code ?? error.message})`,
    {
      details: { reason: code },
    },
  );
}

export interface RawResponse {
  status: number;
  headers: IncomingMessage['headers'];
  text: string;
}

/** An HTTP client of the operator API: `POST /v1/<group>.<method>` with the bearer token, the CA trusted. */
export class ApiClient {
  readonly connection: Connection;
  private readonly timeoutMs: number;
  private versionCheck: Promise<void> | undefined;

  constructor(connection: Connection, options: { timeoutMs?: number } = {}) {
    this.connection = connection;
    this.timeoutMs = options.timeoutMs ?? 60_000;
  }

  /** The tenant commands act on. */
  get tenant(): string {
    return this.connection.tenant;
  }

  /** Opens a request; the caller reads the response (used for the event stream). */
  open(
    method: string,
    path: string,
    options: { body?: string; headers?: Record<string, string>; timeoutMs?: number } = {},
  ): Promise<IncomingMessage> {
    const target = new URL(`${this.connection.url}${path}`);
    const requester = target.protocol === 'https:' ? httpsRequest : (httpRequest as typeof httpsRequest);
    const headers: Record<string, string> = { 'user-agent': 'better-compute-cli', ...options.headers };
    if (this.connection.token) headers.authorization = `Bearer ${this.connection.token}`;
    if (options.body !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(Buffer.byteLength(options.body));
    }
    return new Promise((resolve, reject) => {
      const req = requester(target, {
        method,
        headers,
        ...(this.connection.ca ? { ca: this.connection.ca } : {}),
      });
      const timeout = options.timeoutMs ?? this.timeoutMs;
      req.setTimeout(timeout, () => {
        req.destroy(Object.assign(new Error(`no answer in ${timeout} ms`), { code: 'ETIMEDOUT' }));
      });
      req.on('error', (error) => reject(networkError(this.connection.url, error)));
      req.on('response', (res) => {
        req.setTimeout(0);
        resolve(res);
      });
      if (options.body !== undefined) req.write(options.body);
      req.end();
    });
  }

  async raw(method: string, path: string, body?: string): Promise<RawResponse> {
    const res = await this.open(method, path, body === undefined ? {} : { body });
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of res) chunks.push(chunk as Buffer);
    } catch (error) {
      throw networkError(this.connection.url, error as NodeJS.ErrnoException);
    }
    return { status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') };
  }

  /** Checks once that the server's API version is one this CLI speaks (`INCOMPATIBLE`, exit 7, otherwise). */
  checkVersion(): Promise<void> {
    this.versionCheck ??= (async () => {
      const answer = await this.raw('GET', '/v1/openapi.json');
      let version: unknown;
      try {
        version = (JSON.parse(answer.text) as { info?: { version?: unknown } }).info?.version;
      } catch {
        version = undefined;
      }
      if (answer.status !== 200 || typeof version !== 'string') {
        throw new CliError(
          'INCOMPATIBLE',
          `the server at ${this.connection.url} serves no API description (/v1/openapi.json answered ${answer.status}): not a better-compute server, or one too old for this CLI`,
        );
      }
      const major = version.split('.')[0] ?? version;
      if (!SUPPORTED_API_VERSIONS.includes(major)) {
        throw new CliError(
          'INCOMPATIBLE',
          `the server speaks API version ${version}; this CLI speaks ${SUPPORTED_API_VERSIONS.join(', ')}: install a matching better-compute`,
          { details: { serverVersion: version, supported: SUPPORTED_API_VERSIONS } },
        );
      }
    })();
    return this.versionCheck;
  }

  /**
   * Calls `<group>.<method>`; `tenantId` defaults to the context's tenant. An error answer throws a {@link CliError}
   * with the server's code, message and path. The version check runs alongside the first call.
   */
  async call<T = Record<string, unknown>>(name: string, input: Record<string, unknown> = {}): Promise<T> {
    if (!this.connection.token) {
      throw new CliError(
        'UNAUTHENTICATED',
        'no token: pass --token, set BETTER_COMPUTE_TOKEN, or run better-compute login',
        {
          path: ['--token'],
        },
      );
    }
    const body = JSON.stringify({ tenantId: this.connection.tenant, ...stripUndefined(input) });
    const version = this.checkVersion();
    const answer = this.raw('POST', `/v1/${name}`, body);
    const [versionResult, answerResult] = await Promise.allSettled([version, answer]);
    if (answerResult.status === 'rejected') throw answerResult.reason;
    if (versionResult.status === 'rejected') throw versionResult.reason;
    return parseAnswer<T>(answerResult.value, name);
  }
}

function stripUndefined(input: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(input).filter(([, value]) => value !== undefined));
}

/** An answer's JSON, or its error as a {@link CliError}. */
export function parseAnswer<T>(answer: RawResponse, what: string): T {
  let json: unknown;
  try {
    json = answer.text === '' ? null : JSON.parse(answer.text);
  } catch {
    throw new CliError('INTERNAL', `${what} answered ${answer.status} with a body that is not JSON`);
  }
  if (answer.status >= 200 && answer.status < 300) return json as T;
  const error = (typeof json === 'object' && json !== null ? json : {}) as {
    code?: unknown;
    message?: unknown;
    details?: { path?: unknown } & Record<string, unknown>;
  };
  const code = typeof error.code === 'string' ? error.code : answer.status === 401 ? 'UNAUTHENTICATED' : 'INTERNAL';
  const message = typeof error.message === 'string' ? error.message : `${what} answered ${answer.status}`;
  const path = Array.isArray(error.details?.path) ? (error.details.path as (string | number)[]) : undefined;
  const text = code === 'UNAUTHENTICATED' ? `${message}: the token was refused` : message;
  throw new CliError(code, text, {
    ...(path ? { path } : {}),
    details: { ...(error.details ?? {}), status: answer.status },
  });
}
