import { connect, type TLSSocket } from 'node:tls';
import { expect } from 'vitest';
import type { Answer } from './server-process';

/** The statuses a bad request may get from the API (besides 200 when the fuzzed input happened to be valid). */
export const CLIENT_ERROR_STATUSES = [400, 401, 403, 404, 409];

/** The error codes a client error may carry. */
const CLIENT_ERROR_CODES = [
  'INVALID_INPUT',
  'UNAUTHENTICATED',
  'PERMISSION_DENIED',
  'NOT_FOUND',
  'CONFLICT',
  'INVALID_STATE',
];

/**
 * Checks an answer is 200 with JSON, or one of `statuses` with the API's error body `{ code, message, details }`
 * (`details.path` an array on INVALID_INPUT); returns the error body, if any. `what` names the input in a failure.
 */
export function expectDocumentedAnswer(
  answer: Pick<Answer, 'status' | 'text'>,
  what: string,
  statuses: number[] = CLIENT_ERROR_STATUSES,
  allowOk = true,
): { code: string; message: string; details: Record<string, unknown> } | undefined {
  const label = `${what.slice(0, 300)} → ${answer.status} ${answer.text.slice(0, 300)}`;
  if (allowOk && answer.status === 200) {
    expect(() => JSON.parse(answer.text), label).not.toThrow();
    return undefined;
  }
  expect(statuses, label).toContain(answer.status);
  const body = JSON.parse(answer.text) as { code: string; message: string; details: Record<string, unknown> };
  expect(Object.keys(body).sort(), label).toEqual(['code', 'details', 'message']);
  expect(CLIENT_ERROR_CODES, label).toContain(body.code);
  expect(typeof body.message, label).toBe('string');
  expect(typeof body.details, label).toBe('object');
  if (body.code === 'INVALID_INPUT') expect(Array.isArray(body.details.path), label).toBe(true);
  return body;
}

/** A raw TLS connection: what it received so far, and whether the server closed it. */
export interface RawConnection {
  socket: TLSSocket;
  received(): string;
  isClosed(): boolean;
  /** Resolves when the server (or we) closed the connection; the ms since connecting. */
  closed: Promise<number>;
  write(data: string | Buffer): void;
  /** Resolves once the received text matches `pattern` (rejects after `timeoutMs`). */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
  destroy(): void;
}

/** Opens a TLS connection to `url`'s host and port trusting `ca`, with a client certificate when given. */
export function openRaw(url: string, options: { ca: string; cert?: string; key?: string }): Promise<RawConnection> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = connect({
      host: target.hostname,
      port: Number(target.port),
      servername: target.hostname,
      ca: options.ca,
      ...(options.cert ? { cert: options.cert, key: options.key } : {}),
    });
    let text = '';
    let closed = false;
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
    });
    const closedPromise = new Promise<number>((done) =>
      socket.once('close', () => {
        closed = true;
        done(Date.now() - started);
      }),
    );
    socket.on('error', (error) => {
      if (!socket.readyState || socket.connecting) reject(error);
    });
    socket.once('secureConnect', () =>
      resolve({
        socket,
        received: () => text,
        isClosed: () => closed,
        closed: closedPromise,
        write: (data) => {
          if (!socket.destroyed && socket.writable) socket.write(data);
        },
        waitFor: async (pattern, timeoutMs = 10_000) => {
          const deadline = Date.now() + timeoutMs;
          while (!pattern.test(text)) {
            if (Date.now() > deadline) throw new Error(`timed out waiting for ${pattern} (got ${text.slice(0, 200)})`);
            if (closed && !pattern.test(text)) throw new Error(`closed before ${pattern} (got ${text.slice(0, 200)})`);
            await new Promise((r) => setTimeout(r, 10));
          }
          return text;
        },
        destroy: () => socket.destroy(),
      }),
    );
  });
}

/** Splits one raw HTTP/1.1 answer into its status, headers and body (chunked bodies decoded). */
export function parseRawAnswer(raw: string): { status: number; headers: Record<string, string>; text: string } {
  const end = raw.indexOf('\r\n\r\n');
  const head = end < 0 ? raw : raw.slice(0, end);
  const [statusLine = '', ...lines] = head.split('\r\n');
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1] ?? 0);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = end < 0 ? '' : raw.slice(end + 4);
  if (headers['transfer-encoding'] === 'chunked') {
    let decoded = '';
    for (;;) {
      const lineEnd = body.indexOf('\r\n');
      if (lineEnd < 0) break;
      const size = Number.parseInt(body.slice(0, lineEnd), 16);
      if (!Number.isFinite(size) || size === 0) break;
      decoded += body.slice(lineEnd + 2, lineEnd + 2 + size);
      body = body.slice(lineEnd + 2 + size + 2);
    }
    body = decoded;
  } else if (headers['content-length'] !== undefined) {
    body = body.slice(0, Number(headers['content-length']));
  }
  return { status, headers, text: Buffer.from(body, 'latin1').toString('utf8') };
}

/**
 * Sends `request` (a whole HTTP/1.1 request as bytes, or chunks written one after the other) on a fresh TLS
 * connection and resolves with the first answer once it is complete, or the connection closed.
 */
export async function rawExchange(
  url: string,
  options: { ca: string; cert?: string; key?: string },
  request: string | Buffer | (string | Buffer)[],
  timeoutMs = 10_000,
): Promise<{ status: number; headers: Record<string, string>; text: string; raw: string }> {
  const connection = await openRaw(url, options);
  try {
    for (const part of Array.isArray(request) ? request : [request]) connection.write(part);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const raw = connection.received();
      const parsed = parseRawAnswer(raw);
      const complete =
        parsed.status > 0 &&
        raw.includes('\r\n\r\n') &&
        (parsed.headers['transfer-encoding'] === 'chunked'
          ? raw.endsWith('0\r\n\r\n')
          : raw.length - raw.indexOf('\r\n\r\n') - 4 >= Number(parsed.headers['content-length'] ?? 0));
      if (complete || connection.isClosed()) return { ...parsed, raw };
      if (Date.now() > deadline) throw new Error(`no complete answer in ${timeoutMs} ms: ${raw.slice(0, 200)}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    connection.destroy();
  }
}

/** A JSON fragment written as it is into a body (numbers JSON.stringify cannot produce, keys it would drop). */
export class RawJson {
  constructor(readonly text: string) {}
}

/** JSON text for `value`, with {@link RawJson} fragments and `[key, value]` entry lists (duplicate, `__proto__` keys). */
export function jsonText(value: unknown): string {
  if (value instanceof RawJson) return value.text;
  if (value instanceof Entries) {
    return `{${value.entries.map(([key, item]) => `${JSON.stringify(key)}:${jsonText(item)}`).join(',')}}`;
  }
  if (Array.isArray(value)) return `[${value.map(jsonText).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    return jsonText(new Entries(Object.entries(value)));
  }
  return JSON.stringify(value) ?? 'null';
}

/** An object as its entries, in order, written by {@link jsonText} with every key kept. */
export class Entries {
  constructor(readonly entries: [string, unknown][]) {}
}
