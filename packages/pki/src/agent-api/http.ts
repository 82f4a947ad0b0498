import { HTTP_STATUS_BY_CODE } from '@better-compute/core';
import { apiCallError } from '@better-compute/core/kernel';

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
 * One answer of the agent API as plain data, for whichever transport writes it: the status, the headers (lower-case
 * names) and the JSON text of the body.
 */
export interface AgentAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * A JSON answer, never cached (answers carry certificates and secret values).
 *
 * @example
 * ```ts
 * return jsonAnswer(200, { commands: [] });
 * ```
 */
export function jsonAnswer(status: number, body: unknown, headers: Record<string, string> = {}): AgentAnswer {
  return jsonTextAnswer(status, JSON.stringify(body === undefined ? null : body), headers);
}

function jsonTextAnswer(status: number, body: string, headers: Record<string, string>): AgentAnswer {
  return {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...headers },
    body,
  };
}

/**
 * The error answer `{ code, message, details }` with the status of core's `HTTP_STATUS_BY_CODE` (or `status`); anything
 * that is not a ComputeError is as core's `apiCallError` says (a database fault TIMEOUT or CONFLICT, else INTERNAL
 * without its message).
 *
 * @example
 * ```ts
 * return errorAnswer(new ComputeError('NOT_FOUND', 'no such agent API method'));
 * ```
 */
export function errorAnswer(thrown: unknown, headers: Record<string, string> = {}, status?: number): AgentAnswer {
  const error = apiCallError(thrown);
  let body: string;
  try {
    body = JSON.stringify(error.toJSON());
  } catch {
    // Details that cannot be serialised (a cycle, a BigInt) are left out rather than failing the answer.
    body = JSON.stringify({ code: error.code, message: error.message, details: {} });
  }
  return jsonTextAnswer(status ?? HTTP_STATUS_BY_CODE[error.code] ?? 500, body, headers);
}
