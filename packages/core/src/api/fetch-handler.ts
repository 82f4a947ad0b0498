import { ComputeError, HTTP_STATUS_BY_CODE } from '../errors';
import { apiCallError } from './call-error';
import type { ApiDispatcher } from './dispatcher';

/** The largest request body the HTTP API reads: 1 MiB. */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

/** Options of {@link createFetchHandler}. */
export interface FetchHandlerOptions {
  /** Where the methods are mounted: `POST <basePath>/<group>.<method>`. Default `/v1`. */
  basePath?: string;
  /** Bodies larger than this are refused with 400 INVALID_INPUT. Default {@link DEFAULT_MAX_BODY_BYTES}. */
  maxBodyBytes?: number;
}

const ROUTE = /^([a-z][a-zA-Z0-9]*)\.([a-z][a-zA-Z0-9]*)$/;
const BEARER = /^Bearer +(\S+) *$/i;

function json(status: number, body: string, headers: Record<string, string> = {}): Response {
  return new Response(body, {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...headers },
  });
}

function errorResponse(thrown: unknown, headers: Record<string, string> = {}, statusOverride?: number): Response {
  const error = apiCallError(thrown);
  const status = statusOverride ?? HTTP_STATUS_BY_CODE[error.code] ?? 500;
  let body: string;
  try {
    body = JSON.stringify(error.toJSON());
  } catch {
    body = JSON.stringify({ code: error.code, message: error.message, details: {} });
  }
  const extra: Record<string, string> = error.code === 'UNAUTHENTICATED' ? { 'www-authenticate': 'Bearer' } : {};
  return json(status, body, { ...extra, ...headers });
}

/**
 * The INVALID_INPUT of a body larger than `limit` bytes (`details.reason` `body-too-large`, `details.limitBytes`).
 *
 * @example
 * ```ts
 * if (Number(request.headers['content-length']) > limit) throw bodyTooLargeError(limit);
 * ```
 */
export function bodyTooLargeError(limit: number): ComputeError {
  return new ComputeError('INVALID_INPUT', `the request body is larger than ${limit} bytes`, {
    details: { path: [], reason: 'body-too-large', limitBytes: limit },
  });
}

/**
 * The INVALID_INPUT of a body that is not JSON, not UTF-8 or cut short (`details.reason` `malformed-json`).
 *
 * @example
 * ```ts
 * request.on('aborted', () => reject(malformedBodyError('the request body ended before it was complete')));
 * ```
 */
export function malformedBodyError(message = 'the request body is not valid JSON'): ComputeError {
  // The parser's message is not copied: it quotes the body.
  return new ComputeError('INVALID_INPUT', message, { details: { path: [], reason: 'malformed-json' } });
}

/**
 * Parses a request body read whole: not UTF-8 or not JSON is INVALID_INPUT `malformed-json`; an empty body is `{}`,
 * so methods whose fields are all optional need no body. What {@link readJsonBody} does once the bytes are in, for a
 * transport that reads them itself (the server's agent port reads Node's request stream).
 *
 * @example
 * ```ts
 * const body = parseJsonBody(Buffer.concat(chunks));
 * ```
 */
export function parseJsonBody(bytes: Uint8Array): unknown {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw malformedBodyError();
  }
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text);
  } catch {
    throw malformedBodyError();
  }
}

/**
 * Reads a JSON body of at most `limit` bytes (the declared length first, then what arrives); an empty body is `{}`.
 * Too large, cut short, not UTF-8 or not JSON is INVALID_INPUT with `details.path` `[]` and `details.reason`. The
 * operator API and the agent API both read their bodies with it.
 *
 * @example
 * ```ts
 * const body = await readJsonBody(request, 1024 * 1024);
 * ```
 */
export async function readJsonBody(request: Request, limit: number): Promise<unknown> {
  const declared = request.headers.get('content-length');
  if (declared !== null && Number(declared) > limit) throw bodyTooLargeError(limit);
  const chunks: Uint8Array[] = [];
  let total = 0;
  if (request.body) {
    const reader = request.body.getReader();
    for (;;) {
      // A client that goes away or breaks its chunked encoding mid-body sent no complete JSON: its mistake, not ours.
      const { done, value } = await reader.read().catch(() => {
        throw malformedBodyError('the request body ended before it was complete');
      });
      if (done) break;
      total += value.byteLength;
      if (total > limit) {
        await reader.cancel().catch(() => undefined);
        throw bodyTooLargeError(limit);
      }
      chunks.push(value);
    }
  }
  return parseJsonBody(Buffer.concat(chunks));
}

/**
 * The HTTP face of a dispatcher: `POST <basePath>/<group>.<method>` with `Authorization: Bearer <token>` and a JSON
 * body answers 200 with the JSON result. Errors answer `{ code, message, details }` with the status of
 * `HTTP_STATUS_BY_CODE`; an unknown method is 404 NOT_FOUND, another HTTP method 405, a malformed or too large body
 * 400 INVALID_INPUT. The credential is checked before the body is read.
 *
 * @example
 * ```ts
 * const handler = createFetchHandler(createApi({ groups, makeContext, sql }));
 * const response = await handler(new Request('http://cp/v1/workflows.list', {
 *   method: 'POST', headers: { authorization: `Bearer ${token}` }, body: JSON.stringify({ tenantId: 'root', nodeId }),
 * }));
 * ```
 */
export function createFetchHandler(
  dispatcher: Pick<ApiDispatcher, 'find' | 'dispatch'>,
  options: FetchHandlerOptions = {},
): (request: Request) => Promise<Response> {
  const basePath = (options.basePath ?? '/v1').replace(/\/+$/, '');
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  if (basePath !== '' && !basePath.startsWith('/')) {
    throw new ComputeError('INVALID_CONFIG', 'basePath must start with /', { details: { path: ['basePath'] } });
  }
  if (!Number.isInteger(limit) || limit < 1) {
    throw new ComputeError('INVALID_CONFIG', 'maxBodyBytes must be a positive integer', {
      details: { path: ['maxBodyBytes'] },
    });
  }

  return async (request) => {
    try {
      const { pathname } = new URL(request.url);
      const route = pathname.startsWith(`${basePath}/`) ? ROUTE.exec(pathname.slice(basePath.length + 1)) : null;
      const [group, method] = route ? [route[1] ?? '', route[2] ?? ''] : ['', ''];
      if (!route || !dispatcher.find(group, method)) {
        return errorResponse(new ComputeError('NOT_FOUND', 'no such API method', { details: { path: ['method'] } }));
      }
      if (request.method !== 'POST') {
        const notAllowed = new ComputeError('INVALID_INPUT', 'API methods are called with POST', {
          details: { path: [], reason: 'method-not-allowed', allow: ['POST'] },
        });
        return errorResponse(notAllowed, { allow: 'POST' }, 405);
      }
      const credential = BEARER.exec(request.headers.get('authorization') ?? '')?.[1] ?? '';
      const result = await dispatcher.dispatch({
        group,
        method,
        credential,
        readInput: () => readJsonBody(request, limit),
      });
      return json(200, JSON.stringify(result === undefined ? null : result));
    } catch (error) {
      return errorResponse(error);
    }
  };
}
