import { request } from 'node:https';

/** One event as the stream sent it. */
export interface SseEvent {
  id: string | undefined;
  data: Record<string, unknown>;
}

/** An open SSE connection: what it received so far, and how to end it. */
export interface SseClient {
  status: number;
  events: SseEvent[];
  comments: string[];
  /** Resolves once `count` events arrived (rejects after `timeoutMs`). */
  waitForEvents(count: number, timeoutMs?: number): Promise<SseEvent[]>;
  waitForComment(pattern: RegExp, timeoutMs?: number): Promise<void>;
  close(): void;
  /** The error body, when the status was not 200. */
  body: string;
}

async function until(check: () => boolean, timeoutMs: number, what: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Opens `GET url` as an event stream trusting `ca`, with `headers`; resolves once the headers (and the first bytes when 200) arrived. */
export function openEvents(url: string, options: { ca: string; headers: Record<string, string> }): Promise<SseClient> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: 'GET',
      ca: options.ca,
      headers: { accept: 'text/event-stream', ...options.headers },
    });
    req.on('error', (error) => {
      if ((error as NodeJS.ErrnoException).code !== 'ECONNRESET') reject(error);
    });
    req.on('response', (res) => {
      const client: SseClient = {
        status: res.statusCode ?? 0,
        events: [],
        comments: [],
        body: '',
        waitForEvents: async (count, timeoutMs = 10_000) => {
          await until(
            () => client.events.length >= count,
            timeoutMs,
            () => `${count} events (${client.events.length})`,
          );
          return client.events.slice(0, count);
        },
        waitForComment: (pattern, timeoutMs = 10_000) =>
          until(
            () => client.comments.some((c) => pattern.test(c)),
            timeoutMs,
            () => `a comment ${pattern}`,
          ),
        close: () => {
          res.destroy();
          req.destroy();
        },
      };
      let buffer = '';
      res.setEncoding('utf8');
      res.on('error', () => undefined);
      if (client.status !== 200) {
        res.on('data', (chunk: string) => {
          client.body += chunk;
        });
        res.on('end', () => resolve(client));
        return;
      }
      let resolved = false;
      res.on('data', (chunk: string) => {
        buffer += chunk;
        for (;;) {
          const end = buffer.indexOf('\n\n');
          if (end < 0) break;
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let id: string | undefined;
          const data: string[] = [];
          for (const line of frame.split('\n')) {
            if (line.startsWith(':')) client.comments.push(line.slice(1).trim());
            else if (line.startsWith('id: ')) id = line.slice(4);
            else if (line.startsWith('data: ')) data.push(line.slice(6));
          }
          if (data.length > 0) client.events.push({ id, data: JSON.parse(data.join('\n')) });
        }
        if (!resolved) {
          resolved = true;
          resolve(client);
        }
      });
    });
    req.end();
  });
}
