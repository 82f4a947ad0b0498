import type { ApiClient } from './client';
import { CliError } from './errors';

/** One event as the server streams it (`GET /v1/events`): the `data:` line, with `id:` its cursor. */
export interface StreamEvent {
  id: string;
  tenantId: string;
  subject: string;
  type: string;
  data: Record<string, unknown>;
  at: string;
  cursor?: string;
}

/** Filters and resume point of {@link streamEvents}. */
export interface StreamOptions {
  subject?: string;
  types?: readonly string[];
  tenantId?: string;
  allTenants?: boolean;
  /** Resume after this cursor (else from now). */
  after?: string;
  signal?: AbortSignal;
  /** Called each time the stream is open (its start point fixed), before any event of it. */
  onOpen?: () => void;
}

/**
 * Streams events over SSE, reconnecting with `Last-Event-ID` when the connection drops (a server restart), until
 * `signal` aborts. Errors the server answers (401, 403, 404, 400) end it with a {@link CliError}.
 */
export async function* streamEvents(client: ApiClient, options: StreamOptions): AsyncGenerator<StreamEvent> {
  let cursor = options.after;
  let failures = 0;
  while (!options.signal?.aborted) {
    const query = new URLSearchParams();
    if (options.subject) query.set('subject', options.subject);
    if (options.types && options.types.length > 0) query.set('type', options.types.join(','));
    if (options.allTenants) query.set('allTenants', 'true');
    else if (options.tenantId) query.set('tenantId', options.tenantId);
    if (cursor) query.set('after', cursor);
    let res: Awaited<ReturnType<ApiClient['open']>>;
    try {
      res = await client.open('GET', `/v1/events?${query}`, {
        headers: { accept: 'text/event-stream' },
        timeoutMs: 60_000,
      });
    } catch (error) {
      failures += 1;
      if (failures > 5 || options.signal?.aborted) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.min(5_000, 250 * 2 ** failures)));
      continue;
    }
    if (res.statusCode !== 200) {
      const chunks: Buffer[] = [];
      for await (const chunk of res) chunks.push(chunk as Buffer);
      const { parseAnswer } = await import('./client');
      parseAnswer(
        { status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') },
        'the event stream',
      );
      throw new CliError('INTERNAL', `the event stream answered ${res.statusCode}`);
    }
    failures = 0;
    options.onOpen?.();
    // The stream stays open for as long as it takes; heartbeats keep it alive.
    res.socket?.setTimeout(0);
    const onAbort = () => res.destroy();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    res.setEncoding('utf8');
    let buffer = '';
    try {
      for await (const chunk of res as AsyncIterable<string>) {
        buffer += chunk.replace(/\r\n?/g, '\n');
        for (;;) {
          const end = buffer.indexOf('\n\n');
          if (end < 0) break;
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let id: string | undefined;
          const data: string[] = [];
          for (const line of frame.split('\n')) {
            if (line.startsWith(':')) continue;
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (field === 'id') id = value;
            else if (field === 'data') data.push(value);
          }
          if (data.length === 0) continue;
          if (id) cursor = id;
          let event: StreamEvent;
          try {
            event = JSON.parse(data.join('\n')) as StreamEvent;
          } catch {
            continue;
          }
          yield { ...event, ...(id ? { cursor: id } : {}) };
        }
      }
    } catch {
      // The connection dropped: reconnect from the last cursor.
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
    }
    if (!options.signal?.aborted) await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
