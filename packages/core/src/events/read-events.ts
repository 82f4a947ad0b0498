import { ComputeError } from '../errors';
import { assertStorableText } from '../json/storable-text';
import type { Json } from '../json/types';
import type { SqlExecutor } from '../sql/executor';
import { decodeEventCursor, encodeEventCursor, START_POSITION } from './cursor';
import type { ComputeEvent } from './types';

/** The default and the largest page of {@link readEvents}. */
export const DEFAULT_EVENTS_LIMIT = 100;
export const MAX_EVENTS_LIMIT = 1000;

/**
 * What {@link readEvents} takes: the reading tenant, the cursor of the last page (none to start at the beginning), a
 * limit, and `allTenants`, which only the tenant `root` may set, to read every tenant's events.
 */
export interface ReadEventsInput {
  tenantId: string;
  after?: string;
  limit?: number;
  allTenants?: boolean;
}

/** The tenant that may read every tenant's events (with `allTenants: true`). */
const ROOT_TENANT = 'root';

/** A page of events and the cursor to pass as `after` next time (the same cursor when the page is empty). */
export interface EventsPage {
  events: ComputeEvent[];
  cursor: string;
}

interface EventRow {
  seq: number;
  tx_id: string;
  id: string;
  tenant_id: string;
  subject: string;
  type: string;
  data: Json;
  at: Date;
}

/**
 * Reads a tenant's events in commit-safe order. Rows are ordered by `(tx_id, seq)` and only rows whose transaction id
 * is below the oldest transaction still running are returned: a transaction that began earlier but commits later can
 * therefore never land behind a cursor already handed out. A malformed `after` is INVALID_INPUT at `['after']`.
 *
 * The tenant `root` reads its own events like any tenant; it reads every tenant's only when it asks with
 * `allTenants: true`, which any other tenant is refused (PERMISSION_DENIED at `['allTenants']`). Events of the reader's
 * own open transaction are not returned either: it is still running.
 *
 * @example
 * ```ts
 * let page = await readEvents(db, { tenantId: 'acme' });
 * page = await readEvents(db, { tenantId: 'acme', after: page.cursor });
 * ```
 */
export async function readEvents(sql: SqlExecutor, input: ReadEventsInput): Promise<EventsPage> {
  if (typeof input?.tenantId !== 'string' || input.tenantId.length === 0) {
    throw new ComputeError('INVALID_INPUT', 'tenantId must be a non-empty string', { details: { path: ['tenantId'] } });
  }
  assertStorableText(input.tenantId, ['tenantId']);
  const limit = input.limit ?? DEFAULT_EVENTS_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_EVENTS_LIMIT) {
    throw new ComputeError('INVALID_INPUT', `limit must be an integer from 1 to ${MAX_EVENTS_LIMIT}`, {
      details: { path: ['limit'] },
    });
  }
  if (input.allTenants !== undefined && typeof input.allTenants !== 'boolean') {
    throw new ComputeError('INVALID_INPUT', 'allTenants must be a boolean', { details: { path: ['allTenants'] } });
  }
  const allTenants = input.allTenants === true;
  if (allTenants && input.tenantId !== ROOT_TENANT) {
    throw new ComputeError('PERMISSION_DENIED', "only the tenant root may read every tenant's events", {
      details: { path: ['allTenants'] },
    });
  }
  const from = input.after === undefined ? START_POSITION : decodeEventCursor(input.after, ['after']);
  // Two texts rather than one with an OR, so each uses its own index: (tenant_id, tx_id, seq) or (tx_id, seq).
  const params: unknown[] = [from.txId, from.seq, limit];
  if (!allTenants) params.push(input.tenantId);
  const { rows } = await sql.query<EventRow>(
    `SELECT seq, tx_id::text AS tx_id, id, tenant_id, subject, type, data, at FROM events
     WHERE ${allTenants ? '' : 'tenant_id = $4 AND '}(tx_id, seq) > ($1::xid8, $2::bigint)
       AND tx_id < pg_snapshot_xmin(pg_current_snapshot())
     ORDER BY tx_id, seq LIMIT $3`,
    params,
  );
  const events = rows.map(
    (row): ComputeEvent => ({
      id: row.id,
      tenantId: row.tenant_id,
      subject: row.subject,
      type: row.type,
      data: row.data,
      at: row.at,
      cursor: encodeEventCursor({ txId: row.tx_id, seq: String(row.seq) }),
    }),
  );
  const last = events.at(-1);
  return { events, cursor: last ? last.cursor : encodeEventCursor(from) };
}
