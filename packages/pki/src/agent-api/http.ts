import { ComputeError, HTTP_STATUS_BY_CODE, toComputeError } from '@better-compute/core';

/**
 * The largest request body the agent API reads unless configured: 1 MiB.
 *
 * @example
 * ```ts
 * createAgentApi({ compute, pki: security, maxBodyBytes: DEFAULT_AGENT_MAX_BODY_BYTES / 4 });
 * ```
 */
export const DEFAULT_AGENT_MAX_BODY_BYTES = 1024 * 1024;

/**
 * A JSON answer, never cached (answers carry certificates and secret values).
 *
 * @example
 * ```ts
 * return jsonResponse(200, { commands: [] });
 * ```
 */
export function jsonResponse(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body === undefined ? null : body), {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...headers },
  });
}

/**
 * The error answer `{ code, message, details }` with the status of core's `HTTP_STATUS_BY_CODE` (or `status`); anything
 * that is not a ComputeError is INTERNAL without its message.
 *
 * @example
 * ```ts
 * return errorResponse(new ComputeError('NOT_FOUND', 'no such agent API method'));
 * ```
 */
export function errorResponse(thrown: unknown, headers: Record<string, string> = {}, status?: number): Response {
  const error = toComputeError(thrown);
  let body: unknown;
  try {
    body = JSON.parse(JSON.stringify(error.toJSON()));
  } catch {
    body = { code: error.code, message: error.message, details: {} };
  }
  return jsonResponse(status ?? HTTP_STATUS_BY_CODE[error.code] ?? 500, body, headers);
}

function tooLarge(limit: number): ComputeError {
  return new ComputeError('INVALID_INPUT', `the request body is larger than ${limit} bytes`, {
    details: { path: [], reason: 'body-too-large', limitBytes: limit },
  });
}

function malformed(message = 'the request body is not valid JSON'): ComputeError {
  // The parser's message is not copied: it quotes the body, which may hold a join token.
  return new ComputeError('INVALID_INPUT', message, { details: { path: [], reason: 'malformed-json' } });
}

/**
 * Reads a JSON body of at most `limit` bytes (the declared length is checked first, then what arrives); an empty body
 * is `{}`. Too large or not UTF-8 JSON is INVALID_INPUT with `details.path` `[]` and `details.reason`.
 *
 * @example
 * ```ts
 * const body = await readJsonBody(request, 1024 * 1024);
 * ```
 */
export async function readJsonBody(request: Request, limit: number): Promise<unknown> {
  const declared = request.headers.get('content-length');
  if (declared !== null && Number(declared) > limit) throw tooLarge(limit);
  const chunks: Uint8Array[] = [];
  let total = 0;
  if (request.body) {
    const reader = request.body.getReader();
    for (;;) {
      // A client that goes away or breaks its chunked encoding mid-body sent no complete JSON: its mistake, not ours.
      const { done, value } = await reader.read().catch(() => {
        throw malformed('the request body ended before it was complete');
      });
      if (done) break;
      total += value.byteLength;
      if (total > limit) {
        await reader.cancel().catch(() => undefined);
        throw tooLarge(limit);
      }
      chunks.push(value);
    }
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks));
  } catch {
    throw malformed();
  }
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text);
  } catch {
    throw malformed();
  }
}
