import { ComputeError } from '../errors';
import type { SqlExecutor } from '../sql/executor';
import { readEvents } from './read-events';
import type { ComputeEvent } from './types';

/** The default pause between two polls of {@link subscribeEvents}. */
export const DEFAULT_EVENTS_POLL_MS = 1000;

/** What {@link subscribeEvents} takes. */
export interface SubscribeEventsOptions {
  tenantId: string;
  /** Pause between polls once the subscriber has caught up (default 1,000 ms). */
  pollMs?: number;
  /** Resume after this cursor; from the beginning of the outbox when absent. */
  after?: string;
  /** Called when a read or the handler throws; the same events are tried again at the next poll. */
  onError?: (error: unknown) => void;
}

/**
 * Delivers a tenant's committed events to `handler`, in order, by polling {@link readEvents}. Delivery is
 * at-least-once: the cursor moves past an event only after its handler resolved. Returns an unsubscribe function that
 * resolves once no handler is running.
 *
 * @example
 * ```ts
 * const stop = subscribeEvents(db, async (event) => console.log(event.type), { tenantId: 'acme', pollMs: 500 });
 * await stop();
 * ```
 */
export function subscribeEvents(
  db: SqlExecutor,
  handler: (event: ComputeEvent) => void | Promise<void>,
  options: SubscribeEventsOptions,
): () => Promise<void> {
  const pollMs = options.pollMs ?? DEFAULT_EVENTS_POLL_MS;
  if (!Number.isFinite(pollMs) || pollMs < 1) {
    throw new ComputeError('INVALID_INPUT', 'pollMs must be a positive number', { details: { path: ['pollMs'] } });
  }
  let cursor = options.after;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<void> = Promise.resolve();

  async function drain(): Promise<void> {
    while (!stopped) {
      const page = await readEvents(db, { tenantId: options.tenantId, after: cursor });
      for (const event of page.events) {
        if (stopped) return;
        await handler(event);
        cursor = event.cursor;
      }
      if (page.events.length === 0) return;
    }
  }

  function tick(): void {
    running = drain()
      .catch((error: unknown) => options.onError?.(error))
      .finally(() => {
        if (!stopped) timer = setTimeout(tick, pollMs);
      });
  }

  tick();
  return async () => {
    stopped = true;
    if (timer !== undefined) clearTimeout(timer);
    await running;
  };
}

/**
 * {@link subscribeEvents} under the name the design uses.
 *
 * @example
 * ```ts
 * const stop = subscribe(db, (event) => sse.send(event), { tenantId: 'acme', pollMs: 1000 });
 * ```
 */
export const subscribe = subscribeEvents;
