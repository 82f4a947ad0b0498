import { AsyncResource } from 'node:async_hooks';
import { ComputeError } from '../errors';
import { assertStorableText } from '../json/storable-text';
import type { SqlExecutor } from '../sql/executor';
import { readEvents } from './read-events';
import type { ComputeEvent } from './types';

/** The default pause between two polls of {@link subscribeEvents}. */
export const DEFAULT_EVENTS_POLL_MS = 1000;

// After a nudge the subscriber reads a few times in quick succession, because the publishing transaction commits at
// a moment nobody in-process learns of; then it falls back to `pollMs`.
const NUDGE_DELAYS_MS = [10, 50, 250] as const;

/** What {@link subscribeEvents} takes. */
export interface SubscribeEventsOptions {
  /** Only this tenant's events; every tenant's when absent (an in-process subscriber is trusted). */
  tenantId?: string;
  /** Pause between polls once the subscriber has caught up (default 1,000 ms). */
  pollMs?: number;
  /** Resume after this cursor; from the beginning of the outbox when absent. */
  after?: string;
  /** Called when a read or the handler throws; the same events are tried again at the next poll. */
  onError?: (error: unknown) => void;
}

/** A running subscription. */
export interface EventSubscription {
  /** Stops polling; resolves once no handler is running. */
  unsubscribe(): Promise<void>;
  /** Reads soon instead of at the next poll: something was just published (maybe not committed yet). */
  nudge(): void;
  /** The cursor after the last event the handler finished, or the starting cursor. */
  readonly cursor: string | undefined;
}

/** A handler of delivered events. */
export type EventHandler = (event: ComputeEvent) => void | Promise<void>;

/**
 * Delivers committed events to `handler`, in commit-safe order, by polling {@link readEvents}. Delivery is
 * at-least-once: the cursor moves past an event only after its handler resolved, and an event whose handler threw is
 * delivered again at the next read. `nudge()` makes the next reads come early. Subscribe outside any transaction: the
 * reads run in the async context of this call.
 *
 * @example
 * ```ts
 * const subscription = subscribeEvents(db, async (event) => console.log(event.type), { tenantId: 'acme', pollMs: 500 });
 * await subscription.unsubscribe();
 * ```
 */
export function subscribeEvents(
  db: SqlExecutor,
  handler: EventHandler,
  options: SubscribeEventsOptions = {},
): EventSubscription {
  const pollMs = options.pollMs ?? DEFAULT_EVENTS_POLL_MS;
  if (!Number.isFinite(pollMs) || pollMs < 1) {
    throw new ComputeError('INVALID_INPUT', 'pollMs must be a positive number', { details: { path: ['pollMs'] } });
  }
  if (options.tenantId !== undefined && (typeof options.tenantId !== 'string' || options.tenantId.length === 0)) {
    throw new ComputeError('INVALID_INPUT', 'tenantId must be a non-empty string', { details: { path: ['tenantId'] } });
  }
  if (options.tenantId !== undefined) assertStorableText(options.tenantId, ['tenantId']);
  if (typeof handler !== 'function') {
    throw new ComputeError('INVALID_INPUT', 'handler must be a function', { details: { path: ['handler'] } });
  }
  const scope =
    options.tenantId === undefined ? { tenantId: 'root', allTenants: true } : { tenantId: options.tenantId };
  let cursor = options.after;
  let stopped = false;
  let draining = false;
  let nudges: number = NUDGE_DELAYS_MS.length;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<void> = Promise.resolve();

  async function drain(): Promise<void> {
    while (!stopped) {
      const page = await readEvents(db, { ...scope, after: cursor });
      for (const event of page.events) {
        if (stopped) return;
        await handler(event);
        cursor = event.cursor;
      }
      if (page.events.length === 0) return;
    }
  }

  function schedule(): void {
    if (stopped) return;
    const delay = nudges < NUDGE_DELAYS_MS.length ? (NUDGE_DELAYS_MS[nudges++] as number) : pollMs;
    timer = setTimeout(tickInOwnContext, delay);
  }

  function tick(): void {
    timer = undefined;
    draining = true;
    running = drain()
      .catch((error: unknown) => options.onError?.(error))
      .finally(() => {
        draining = false;
        schedule();
      });
  }

  // A nudge arrives from inside the publisher's transaction; a timer set there would carry that transaction's async
  // context into the read (PGlite refuses such a read), so every read runs in the context subscribe was called in.
  const tickInOwnContext = AsyncResource.bind(tick);
  tick();
  return {
    get cursor() {
      return cursor;
    },
    nudge() {
      if (stopped) return;
      nudges = 0;
      // While a read runs, the reschedule after it picks the nudge up.
      if (draining) return;
      if (timer !== undefined) clearTimeout(timer);
      schedule();
    },
    async unsubscribe() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      await running;
    },
  };
}
