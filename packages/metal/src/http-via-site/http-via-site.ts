import { type Command, ComputeError, type Json } from '@better-compute/core';
import { addMs } from '@better-compute/core/kernel';
import { type StepContext, stepCommandKey, stepNotReady } from '@better-compute/provision';
import { machineForStep, RELAY_POLL_MS, siteRelayAgent } from '../steps/relay';
import { checkMachineUrl } from './machine-url';

/** The HTTP methods `httpViaSite` sends. */
export type HttpViaSiteMethod = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** One request `httpViaSite` has the site agent make to the machine. */
export interface HttpViaSiteRequest {
  /** http(s) to one of the machine's own addresses (an IP address the control plane knows for it). */
  url: string;
  method?: HttpViaSiteMethod;
  /** Header name → value; at most 64 headers. */
  headers?: Record<string, string>;
  /** A text body, at most 1 MiB. */
  body?: string;
  /** The agent's budget for one request, 1 ms to 10 minutes (default 30 s). */
  timeoutMs?: number;
  /**
   * Keep asking until the machine answers: while a request gets no HTTP answer, or a 5xx, the step is re-run
   * (`stepNotReady`) and a fresh request sent after `pollIntervalMs`, until the step's deadline.
   */
  poll?: boolean;
  /** The pause between two polls (default 5 s, at least 1 s). */
  pollIntervalMs?: number;
  /** Tells apart several requests of one step (default `http`); part of each command's key. */
  key?: string;
}

/** What the machine answered. */
export interface HttpViaSiteResponse {
  status: number;
  headers: Record<string, string>;
  /** The body as text (UTF-8), or base64 when `bodyEncoding` is `base64`. */
  body: string;
  bodyEncoding: 'utf-8' | 'base64';
  commandId: string;
}

const OPEN = new Set(['pending', 'dispatched', 'acked', 'running']);
const DEFAULT_POLL_INTERVAL_MS = 5_000;
const KEY = /^[a-z0-9][a-z0-9-]{0,63}$/;

function invalid(message: string, path: (string | number)[]): ComputeError {
  return new ComputeError('INVALID_INPUT', message, { details: { path } });
}

function checkRequest(request: HttpViaSiteRequest): void {
  if (typeof request !== 'object' || request === null) throw invalid('httpViaSite takes a request object', []);
  const methods = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];
  if (request.method !== undefined && !methods.includes(request.method)) {
    throw invalid(`method must be one of ${methods.join(', ')}`, ['method']);
  }
  if (request.headers !== undefined) {
    const entries =
      typeof request.headers === 'object' && request.headers !== null ? Object.entries(request.headers) : [];
    if (entries.length === 0 && (typeof request.headers !== 'object' || request.headers === null)) {
      throw invalid('headers must be an object of strings', ['headers']);
    }
    if (entries.length > 64) throw invalid('at most 64 headers', ['headers']);
    for (const [name, value] of entries) {
      if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$/.test(name))
        throw invalid('a header name must be a token', ['headers', name]);
      if (typeof value !== 'string' || value.length > 8192 || /[\r\n\0]/.test(value)) {
        throw invalid('a header value must be one line of text', ['headers', name]);
      }
    }
  }
  if (request.body !== undefined && (typeof request.body !== 'string' || request.body.length > 1_048_576)) {
    throw invalid('body must be a string of at most 1 MiB', ['body']);
  }
  const timeout = request.timeoutMs;
  if (timeout !== undefined && (!Number.isInteger(timeout) || timeout < 1 || timeout > 600_000)) {
    throw invalid('timeoutMs must be a whole number from 1 to 600000', ['timeoutMs']);
  }
  const interval = request.pollIntervalMs;
  if (interval !== undefined && (!Number.isInteger(interval) || interval < 1_000 || interval > 3_600_000)) {
    throw invalid('pollIntervalMs must be a whole number from 1000 to 3600000', ['pollIntervalMs']);
  }
  if (request.key !== undefined && (typeof request.key !== 'string' || !KEY.test(request.key))) {
    throw invalid('key must be lower-case letters, digits and -, at most 64', ['key']);
  }
}

/**
 * The latest poll command of a step: polls are keyed `<key>#0`, `<key>#1`, … and each is sent only once the one
 * before ended, so they exist for 0..n-1. Found by galloping then halving, a few indexed lookups however many polls
 * the step made.
 */
async function latestPoll(
  ctx: StepContext,
  agentNodeId: string,
  key: string,
): Promise<{ index: number; command: Command | undefined }> {
  const find = (i: number) => ctx.commands.findByKey(ctx.sql, agentNodeId, stepCommandKey(ctx, `${key}#${i}`));
  const first = await find(0);
  if (!first) return { index: 0, command: undefined };
  let low = 0;
  let lowCommand = first;
  let high = 1;
  for (;;) {
    const found = await find(high);
    if (!found) break;
    low = high;
    lowCommand = found;
    high *= 2;
  }
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2);
    const found = await find(middle);
    if (found) {
      low = middle;
      lowCommand = found;
    } else high = middle;
  }
  return { index: low, command: lowCommand };
}

function decodeAnswer(command: Command): Omit<HttpViaSiteResponse, 'commandId'> | undefined {
  if (!command.result || command.result.length === 0) return undefined;
  let answer: { status?: unknown; headers?: unknown; body?: unknown; bodyEncoding?: unknown };
  try {
    answer = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(command.result));
  } catch {
    throw new ComputeError('DRIVER_ERROR', "httpViaSite: the site agent's answer is not JSON", {
      details: { commandId: command.id, reason: 'result-malformed' },
    });
  }
  if (typeof answer?.status !== 'number' || !Number.isInteger(answer.status)) return undefined;
  const headers: Record<string, string> = {};
  if (typeof answer.headers === 'object' && answer.headers !== null) {
    for (const [name, value] of Object.entries(answer.headers)) if (typeof value === 'string') headers[name] = value;
  }
  return {
    status: answer.status,
    headers,
    body: typeof answer.body === 'string' ? answer.body : '',
    bodyEncoding: answer.bodyEncoding === 'base64' ? 'base64' : 'utf-8',
  };
}

/**
 * Has the site agent make one HTTP request to the workflow's machine, for a relaying step (declare
 * `sends: ['site.httpProxy']`; the kind is destructive, so it carries the workflow's batch). The URL is checked
 * before anything is sent (SSRF): http or https, an IP address that is one of the machine's own known addresses
 * (`metal_machines.addresses`), never loopback, link-local, multicast, a metadata service or another machine's
 * address; a refusal is INVALID_INPUT at `['url']` (`details.reason: 'ssrf'`). One `site.httpProxy` command goes to
 * the site agent (the boot-lease holder first; NO_SITE_AGENT near the deadline when none is connected), keyed
 * `wf:<id>:<step>#<attempt>:<key>#<n>`; while it is open the step waits (`stepNotReady`). Without `poll`, a request
 * that got no answer is DRIVER_ERROR; with `poll`, a fresh request follows after `pollIntervalMs` until the machine
 * answers (any status below 500) or the step's deadline.
 *
 * The site agent answers `{ status, headers, body, bodyEncoding? }`, and fails the command when it got no answer
 * (connection refused, timed out).
 *
 * @example
 * ```ts
 * const response = await httpViaSite(ctx, { url: `https://${address}:50000/machine/version`, poll: true });
 * response.status; // 200
 * ```
 */
export async function httpViaSite(ctx: StepContext, request: HttpViaSiteRequest): Promise<HttpViaSiteResponse> {
  checkRequest(request);
  const machine = await machineForStep(ctx, 'httpViaSite');
  const target = checkMachineUrl(request.url, { own: machine.addresses }, ['url']);
  const key = request.key ?? 'http';
  const agentNodeId = await siteRelayAgent(ctx, machine, `${key}#0`);
  const { index, command } = await latestPoll(ctx, agentNodeId, key);
  const now = ctx.clock.now();
  const interval = request.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
  let next = index;
  if (command) {
    if (OPEN.has(command.state) && command.notAfter.getTime() > now.getTime()) throw stepNotReady(RELAY_POLL_MS);
    const answer = command.state === 'succeeded' ? decodeAnswer(command) : undefined;
    if (answer && (!request.poll || answer.status < 500)) return { ...answer, commandId: command.id };
    if (!request.poll) {
      const reason = command.reason ?? (answer ? `status ${answer.status}` : command.state);
      throw new ComputeError('DRIVER_ERROR', `httpViaSite: the machine did not answer (${reason})`, {
        details: { commandId: command.id, state: command.state, reason },
      });
    }
    const waited = now.getTime() - (command.finishedAt ?? command.updatedAt).getTime();
    if (waited < interval) throw stepNotReady(interval - waited);
    next = index + 1;
  }
  const timeoutMs = request.timeoutMs ?? 30_000;
  await ctx.sql.transaction((tx) =>
    ctx.commands.enqueue(tx, {
      nodeId: agentNodeId,
      kind: 'site.httpProxy',
      key: stepCommandKey(ctx, `${key}#${next}`),
      // The agent's budget plus room to be polled and to report.
      notAfter: addMs(now, timeoutMs + 60_000),
      targetNodeId: machine.nodeId,
      ...(ctx.batchId ? { batchId: ctx.batchId } : {}),
      payload: {
        method: request.method ?? 'GET',
        url: target.url.toString(),
        timeoutMs,
        ...(request.headers ? { headers: request.headers as Json } : {}),
        ...(request.body !== undefined ? { body: request.body } : {}),
      },
    }),
  );
  throw stepNotReady(RELAY_POLL_MS);
}
