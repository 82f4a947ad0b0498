import * as v from 'valibot';
import { DEFAULT_EVENTS_LIMIT, MAX_EVENT_TYPES, MAX_EVENTS_LIMIT, readEvents } from '../events/read-events';
import type { Json } from '../json/types';
import { defineApiGroup, defineApiMethod } from './define';
import { limitSchema, textSchema } from './inputs';
import { resolveTenantResource } from './resources';

/** An event as `events.list` answers it (`at` as ISO 8601). */
export interface ApiEvent {
  id: string;
  tenantId: string;
  subject: string;
  type: string;
  data: Json;
  at: string;
  cursor: string;
}

/** What `events.list` answers: the events in commit-safe order and the cursor to pass as `after` next time. */
export interface ApiEventsPage {
  events: ApiEvent[];
  cursor: string;
}

/**
 * The `events` API group of the core module: `list` (`compute:events:read`, decided on the tenant) reads the tenant's
 * events after a cursor, in commit-safe order, as `readEvents` does (the server streams the same over SSE; this is the
 * pull form). `subjectPrefix` and `types` filter; a filtered page may be short, or empty, while its cursor moves on.
 * A root credential names any tenant, and with `tenantId: 'root', allTenants: true` reads every tenant's events.
 * `fromEnd: true` (not with `after`) answers the newest `limit` events instead, and a cursor at the end of the outbox.
 *
 * @example
 * ```ts
 * let page = await compute.api.events.list(token, { tenantId: 'acme', subjectPrefix: 'node/' });
 * page = await compute.api.events.list(token, { tenantId: 'acme', subjectPrefix: 'node/', after: page.cursor });
 * const newest = await compute.api.events.list(token, { tenantId: 'acme', fromEnd: true, limit: 20 });
 * ```
 */
export function eventsApi() {
  const list = defineApiMethod({
    input: v.object({
      tenantId: textSchema('tenantId'),
      after: v.optional(textSchema('after', 128)),
      limit: limitSchema(MAX_EVENTS_LIMIT, DEFAULT_EVENTS_LIMIT),
      subjectPrefix: v.optional(textSchema('subjectPrefix')),
      types: v.optional(
        v.pipe(
          v.array(textSchema('an event type', 256), 'types must be a list of event types'),
          v.minLength(1, 'types must not be empty'),
          v.maxLength(MAX_EVENT_TYPES, `types must hold at most ${MAX_EVENT_TYPES} event types`),
        ),
      ),
      allTenants: v.optional(v.boolean('allTenants must be a boolean')),
      fromEnd: v.optional(v.boolean('fromEnd must be a boolean')),
    }),
    permission: 'compute:events:read',
    resource: (input, ctx) => resolveTenantResource(ctx.sql, input.tenantId),
    description:
      "The tenant's events after a cursor (none: from the start), oldest first in commit-safe order, and the cursor " +
      'to read on from; optionally only a subject prefix or some types. With fromEnd, the newest `limit` events ' +
      '(still oldest first) and a cursor at the end, to follow what comes next.',
    handler: async (input, ctx): Promise<ApiEventsPage> => {
      const page = await readEvents(ctx.sql, {
        tenantId: input.tenantId,
        limit: input.limit,
        ...(input.after === undefined ? {} : { after: input.after }),
        ...(input.subjectPrefix === undefined ? {} : { subjectPrefix: input.subjectPrefix }),
        ...(input.types === undefined ? {} : { types: input.types }),
        ...(input.allTenants === undefined ? {} : { allTenants: input.allTenants }),
        ...(input.fromEnd === undefined ? {} : { fromEnd: input.fromEnd }),
      });
      return {
        events: page.events.map((event) => ({ ...event, at: event.at.toISOString() })),
        cursor: page.cursor,
      };
    },
  });

  return defineApiGroup('events', { list });
}

/** The `events` group {@link eventsApi} returns. */
export type EventsApi = ReturnType<typeof eventsApi>;
