import { type Compute, ComputeError, type ComputeEvent, type SqlExecutor } from '@better-compute/core';
import {
  authenticate,
  decodeEventCursor,
  encodeEventCursor,
  grantsPermission,
  systemClock,
} from '@better-compute/core/kernel';
import type { Context } from 'hono';
import { type SSEStreamingApi, streamSSE } from 'hono/streaming';
import type { ServerLogger } from './logger';

/** The permission a credential needs to read the event stream. */
export const EVENTS_READ_PERMISSION = 'compute:events:read';

/** Options of {@link createEventStreams}. */
export interface EventStreamOptions {
  compute: Compute;
  log: ServerLogger;
  /** A comment line every so often, so proxies keep the connection and clients notice a dead one. */
  heartbeatMs: number;
  /** How often the outbox is read once caught up (events published in this process wake it at once). */
  pollMs: number;
}

/** The SSE route and what shutdown needs: every open stream ends, so the server can close. */
export interface EventStreams {
  handle(c: Context): Promise<Response>;
  /** Ends every open stream (clients reconnect elsewhere with Last-Event-ID). */
  closeAll(): Promise<void>;
  readonly open: number;
}

const BEARER = /^Bearer +(\S+) *$/i;
const MAX_FILTER_LENGTH = 512;

function problem(error: ComputeError, status: number): Response {
  return new Response(JSON.stringify(error.toJSON()), {
    status,
    headers: {
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'no-store',
      ...(status === 401 ? { 'www-authenticate': 'Bearer' } : {}),
    },
  });
}

/** The position after every event committed so far: where a stream without a cursor starts. */
async function currentCursor(sql: SqlExecutor): Promise<string> {
  const { rows } = await sql.query<{ tx_id: string; seq: string }>(
    `SELECT tx_id::text AS tx_id, seq::text AS seq FROM events
     WHERE tx_id < pg_snapshot_xmin(pg_current_snapshot()) ORDER BY tx_id DESC, seq DESC LIMIT 1`,
  );
  const row = rows[0];
  return encodeEventCursor(row ? { txId: row.tx_id, seq: row.seq } : { txId: '0', seq: '0' });
}

interface StreamRequest {
  /** undefined: every tenant (root with allTenants=true). */
  tenantId: string | undefined;
  after: string;
  subjectPrefix: string | undefined;
  types: Set<string> | undefined;
}

async function parseRequest(c: Context, compute: Compute): Promise<StreamRequest | Response> {
  const token = BEARER.exec(c.req.header('authorization') ?? '')?.[1] ?? '';
  let principal: Awaited<ReturnType<typeof authenticate>>;
  try {
    principal = await authenticate(compute.database, token, systemClock);
  } catch (error) {
    if (error instanceof ComputeError && error.code === 'UNAUTHENTICATED') return problem(error, 401);
    throw error;
  }
  if (!grantsPermission(principal.permissions, EVENTS_READ_PERMISSION)) {
    return problem(
      new ComputeError('PERMISSION_DENIED', `reading events needs ${EVENTS_READ_PERMISSION}`, {
        details: { path: [] },
      }),
      403,
    );
  }
  const query = (name: string) => c.req.query(name);
  const badInput = (path: string, message: string) =>
    problem(new ComputeError('INVALID_INPUT', message, { details: { path: [path] } }), 400);

  let tenantId: string | undefined = principal.tenantId;
  const askedTenant = query('tenantId');
  const allTenants = query('allTenants');
  if (allTenants !== undefined && allTenants !== 'true' && allTenants !== 'false') {
    return badInput('allTenants', 'allTenants must be true or false');
  }
  if (principal.tenantId === 'root') {
    if (allTenants === 'true') tenantId = undefined;
    else if (askedTenant !== undefined && askedTenant !== '') tenantId = askedTenant;
  } else if (allTenants === 'true' || (askedTenant !== undefined && askedTenant !== principal.tenantId)) {
    // Another tenant's stream is refused as if it did not exist, as the API does.
    return problem(new ComputeError('NOT_FOUND', 'no such tenant', { details: { path: ['tenantId'] } }), 404);
  }

  const subjectPrefix = query('subject');
  if (subjectPrefix !== undefined && subjectPrefix.length > MAX_FILTER_LENGTH) {
    return badInput('subject', `subject must be at most ${MAX_FILTER_LENGTH} characters`);
  }
  const typeValues = (c.req.queries('type') ?? []).flatMap((value) => value.split(',')).filter((t) => t !== '');
  if (typeValues.some((t) => t.length > MAX_FILTER_LENGTH)) {
    return badInput('type', `a type must be at most ${MAX_FILTER_LENGTH} characters`);
  }

  // Last-Event-ID (a reconnecting EventSource sends it) wins over ?after=; ?from=start reads the whole outbox.
  const resumeFrom = c.req.header('last-event-id') ?? query('after');
  let after: string;
  if (resumeFrom !== undefined && resumeFrom !== '') {
    try {
      decodeEventCursor(resumeFrom, ['after']);
    } catch {
      return badInput('after', 'Last-Event-ID (or after) is not an event cursor of this server');
    }
    after = resumeFrom;
  } else if (query('from') === 'start') {
    after = encodeEventCursor({ txId: '0', seq: '0' });
  } else if (query('from') === undefined || query('from') === 'now') {
    after = await currentCursor(compute.database);
  } else {
    return badInput('from', 'from must be start or now');
  }
  return {
    tenantId,
    after,
    subjectPrefix: subjectPrefix === '' ? undefined : subjectPrefix,
    types: typeValues.length === 0 ? undefined : new Set(typeValues),
  };
}

function wanted(event: ComputeEvent, request: StreamRequest): boolean {
  if (request.subjectPrefix !== undefined && !event.subject.startsWith(request.subjectPrefix)) return false;
  if (request.types !== undefined && !request.types.has(event.type)) return false;
  return true;
}

/**
 * `GET /v1/events`: the outbox as Server-Sent Events. Bearer token with `compute:events:read`; the tenant's own events
 * (root: `?tenantId=` for another tenant's, `?allTenants=true` for everyone's). Filters: `?subject=<prefix>`,
 * `?type=<type>` (repeat or comma-separate). Each event is `id: <cursor>` and `data: { id, tenantId, subject, type,
 * data, at }`; a client resumes with `Last-Event-ID` (or `?after=`) and gets every later event once, in commit order.
 * Without a cursor the stream starts at the present (`?from=start`: the whole outbox). A `: heartbeat` comment keeps
 * idle connections open.
 *
 * @example
 * ```ts
 * const streams = createEventStreams({ compute, log, heartbeatMs: 15_000, pollMs: 500 });
 * app.get('/v1/events', (c) => streams.handle(c));
 * ```
 */
export function createEventStreams(options: EventStreamOptions): EventStreams {
  const { compute, log } = options;
  const open = new Set<{ stream: SSEStreamingApi; done: Promise<void> }>();
  let closing = false;

  return {
    get open() {
      return open.size;
    },
    async handle(c) {
      if (closing) {
        return problem(
          new ComputeError('INVALID_STATE', 'the server is shutting down', { details: { path: [] } }),
          503,
        );
      }
      const request = await parseRequest(c, compute);
      if (request instanceof Response) return request;
      c.header('x-accel-buffering', 'no');
      return streamSSE(c, async (stream) => {
        let finish: () => void = () => undefined;
        const done = new Promise<void>((resolve) => {
          finish = resolve;
        });
        const entry = { stream, done };
        open.add(entry);
        stream.onAbort(() => finish());
        // The first bytes: the client knows the stream started at its cursor before it acts.
        await stream.write(`retry: 2000\n: connected ${request.after}\n\n`);
        const subscription = compute.events.subscribe(
          async (event) => {
            if (stream.aborted || stream.closed) throw new Error('the client went away');
            if (!wanted(event, request)) return;
            await stream.writeSSE({
              id: event.cursor,
              data: JSON.stringify({
                id: event.id,
                tenantId: event.tenantId,
                subject: event.subject,
                type: event.type,
                data: event.data,
                at: event.at,
              }),
            });
          },
          {
            ...(request.tenantId === undefined ? {} : { tenantId: request.tenantId }),
            after: request.after,
            pollMs: options.pollMs,
            onError: (error) => {
              if (!stream.aborted && !stream.closed) log.warn({ err: String(error) }, 'event stream read failed');
            },
          },
        );
        const heartbeat = setInterval(() => {
          void stream.write(': heartbeat\n\n');
        }, options.heartbeatMs);
        try {
          await done;
        } finally {
          clearInterval(heartbeat);
          await subscription.unsubscribe();
          open.delete(entry);
        }
      });
    },
    async closeAll() {
      closing = true;
      const entries = [...open];
      for (const entry of entries) {
        await entry.stream.close();
        entry.stream.abort();
      }
      await Promise.all(entries.map((entry) => entry.done));
    },
  };
}
