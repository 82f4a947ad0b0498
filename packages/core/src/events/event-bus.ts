import { requireText } from '../checks/checks';
import type { Clock } from '../clock';
import { ComputeError } from '../errors';
import { newId } from '../ids';
import { assertJson } from '../json';
import type { Json } from '../json/types';
import type { SqlExecutor } from '../sql/executor';
import { type EventHandler, type EventSubscription, type SubscribeEventsOptions, subscribeEvents } from './subscribe';
import type { EventBus, EventStaging } from './types';

/** The longest subject or type an event may carry. */
export const MAX_EVENT_NAME_LENGTH = 512;

/** What {@link createEventBus} takes: the clock, and the database `subscribe` reads from (needed only to subscribe). */
export interface EventBusOptions {
  clock: Clock;
  db?: SqlExecutor;
  /** The default `pollMs` of subscriptions (1,000 ms). */
  pollMs?: number;
}

/**
 * The kernel's event bus: the {@link EventBus} port plus in-process subscriptions. A subscription delivers an event
 * after its transaction commits, by polling the outbox; `publish` nudges the subscriptions that would see the event so
 * they read early, which only hastens delivery (the publishing transaction may not have committed yet).
 *
 * @example
 * ```ts
 * const bus = createEventBus({ clock, db });
 * const subscription = bus.subscribe((event) => console.log(event.type), { tenantId: 'acme' });
 * await subscription.unsubscribe();
 * ```
 */
export interface KernelEventBus extends EventBus {
  /** Delivers committed events of `tenantId` (of every tenant when absent) to `handler`, at least once, in order. */
  subscribe(handler: EventHandler, options?: SubscribeEventsOptions): EventSubscription;
}

function checkEvent(event: unknown): { tenantId: string; subject: string; type: string; data: unknown } {
  if (typeof event !== 'object' || event === null) {
    throw new ComputeError('INVALID_INPUT', 'an event must be an object', { details: { path: [] } });
  }
  const candidate = event as Record<string, unknown>;
  const checked = {
    tenantId: requireText(candidate.tenantId, ['tenantId'], { max: MAX_EVENT_NAME_LENGTH }),
    subject: requireText(candidate.subject, ['subject'], { max: MAX_EVENT_NAME_LENGTH }),
    type: requireText(candidate.type, ['type'], { max: MAX_EVENT_NAME_LENGTH }),
    data: candidate.data,
  };
  assertJson(checked.data, ['data'], 'INVALID_INPUT');
  return checked;
}

/**
 * The events outbox writer and in-process subscriber: `publish` inserts one row in the caller's transaction (so a
 * rolled-back change never publishes), stamped with the clock's time and an `evt_…` id. A bad subject, type, tenant or
 * data is INVALID_INPUT with `details.path`. `subscribe` needs `db`; without it it is INVALID_CONFIG. `stage`
 * ({@link EventStaging}) is for core's commit service.
 *
 * @example
 * ```ts
 * const events = createEventBus({ clock: systemClock, db });
 * await db.transaction((tx) => events.publish(tx, { tenantId, subject: `node/${id}`, type: 'node.deployed', data: { id } }));
 * ```
 */
export function createEventBus(options: EventBusOptions): KernelEventBus & EventStaging {
  const { clock, db } = options;
  const live = new Set<{ tenantId: string | undefined; subscription: EventSubscription }>();
  const nudge = (tenantId: string) => {
    for (const entry of live) {
      if (entry.tenantId === undefined || entry.tenantId === tenantId) entry.subscription.nudge();
    }
  };
  return {
    async publish(tx, event) {
      const { tenantId, subject, type, data } = checkEvent(event);
      await tx.query(
        'INSERT INTO events (id, tenant_id, subject, type, data, at) VALUES ($1, $2, $3, $4, $5::jsonb, $6)',
        [newId('evt'), tenantId, subject, type, JSON.stringify(data), clock.now()],
      );
      nudge(tenantId);
    },
    stage(event) {
      const checked = checkEvent(event);
      nudge(checked.tenantId);
      return { ...checked, data: checked.data as Json, id: newId('evt'), at: clock.now() };
    },
    subscribe(handler, subscribeOptions = {}) {
      if (!db) {
        throw new ComputeError('INVALID_CONFIG', 'createEventBus needs db to subscribe', { details: { path: ['db'] } });
      }
      const pollMs = subscribeOptions.pollMs ?? options.pollMs;
      const subscription = subscribeEvents(db, handler, {
        ...subscribeOptions,
        ...(pollMs === undefined ? {} : { pollMs }),
      });
      const entry = { tenantId: subscribeOptions.tenantId, subscription };
      live.add(entry);
      return {
        nudge: () => subscription.nudge(),
        get cursor() {
          return subscription.cursor;
        },
        async unsubscribe() {
          live.delete(entry);
          await subscription.unsubscribe();
        },
      };
    },
  };
}
