import type { Clock } from '../clock';
import { ComputeError, type ErrorPath } from '../errors';
import { newId } from '../ids';
import { assertJson } from '../json';
import type { EventBus } from './types';

/** The longest subject or type an event may carry. */
export const MAX_EVENT_NAME_LENGTH = 512;

function requireName(value: unknown, path: ErrorPath): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_EVENT_NAME_LENGTH) {
    throw new ComputeError('INVALID_INPUT', `${path.join('.')} must be a non-empty string of at most 512 characters`, {
      details: { path },
    });
  }
  return value;
}

/** What {@link createEventBus} takes. */
export interface EventBusOptions {
  clock: Clock;
}

/**
 * The events outbox writer: `publish` inserts one row in the caller's transaction (so a rolled-back change never
 * publishes), stamped with the clock's time and an `evt_…` id. A bad subject, type, tenant or data is INVALID_INPUT
 * with `details.path`.
 *
 * @example
 * ```ts
 * const events = createEventBus({ clock: systemClock });
 * await db.transaction((tx) => events.publish(tx, { tenantId, subject: `node/${id}`, type: 'node.deployed', data: { id } }));
 * ```
 */
export function createEventBus(options: EventBusOptions): EventBus {
  const { clock } = options;
  return {
    async publish(tx, event) {
      if (typeof event !== 'object' || event === null) {
        throw new ComputeError('INVALID_INPUT', 'an event must be an object', { details: { path: [] } });
      }
      const tenantId = requireName(event.tenantId, ['tenantId']);
      const subject = requireName(event.subject, ['subject']);
      const type = requireName(event.type, ['type']);
      assertJson(event.data, ['data'], 'INVALID_INPUT');
      const id = newId('evt');
      await tx.query(
        'INSERT INTO events (id, tenant_id, subject, type, data, at) VALUES ($1, $2, $3, $4, $5::jsonb, $6)',
        [id, tenantId, subject, type, JSON.stringify(event.data), clock.now()],
      );
    },
  };
}
