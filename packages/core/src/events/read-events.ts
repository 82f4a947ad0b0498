import { ComputeError } from '../errors';
import { assertStorableText } from '../json/storable-text';
import type { Json } from '../json/types';
import type { SqlExecutor } from '../sql/executor';
import { decodeEventCursor, type EventPosition, encodeEventCursor, START_POSITION } from './cursor';
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
  /** Only events whose subject starts with this text (`node/`, `site/site_01k…`). */
  subjectPrefix?: string;
  /** Only events of these types (`metal.node.deployed`, …); at most {@link MAX_EVENT_TYPES}. */
  types?: readonly string[];
  /**
   * The newest `limit` events instead of the oldest after a cursor (not with `after`): still oldest first, and the
   * cursor at the newest event there is, so reading on from it sees only what comes later (`events tail`). With a
   * filter, the newest `limit` matches among the newest {@link FROM_END_SCAN_EVENTS} (or `limit × FILTER_SCAN_FACTOR`,
   * when more) events.
   */
  fromEnd?: boolean;
}

/** The most types one read may filter on. */
export const MAX_EVENT_TYPES = 100;

/**
 * How many events a filtered read looks at, at most, per event it may return: a page of a rare subject or type is
 * found within `limit × FILTER_SCAN_FACTOR` stored events, and the cursor moves past every event looked at, so the next
 * read goes on from there instead of looking at them again.
 */
export const FILTER_SCAN_FACTOR = 10;

/**
 * How many of the newest events a filtered `fromEnd` read looks at, at least: a tail of a node's or a type's events
 * finds them among the last ten thousand of the tenant's, in one bounded backward index scan.
 */
export const FROM_END_SCAN_EVENTS = 10_000;

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
 * `subjectPrefix` and `types` keep only the events that match; such a read looks at no more than
 * `limit × FILTER_SCAN_FACTOR` events, and its cursor moves past every event it looked at (so a page may be short, or
 * empty, with a cursor that moved: keep reading from the cursor).
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
  const filter = checkFilter(input);
  if (input.fromEnd !== undefined && typeof input.fromEnd !== 'boolean') {
    throw new ComputeError('INVALID_INPUT', 'fromEnd must be a boolean', { details: { path: ['fromEnd'] } });
  }
  if (input.fromEnd === true) {
    if (input.after !== undefined) {
      throw new ComputeError('INVALID_INPUT', 'fromEnd reads the newest events: it takes no after cursor', {
        details: { path: ['fromEnd'] },
      });
    }
    return readNewest(sql, input.tenantId, allTenants, limit, filter);
  }
  const from = input.after === undefined ? START_POSITION : decodeEventCursor(input.after, ['after']);
  if (filter !== undefined) return readFiltered(sql, input.tenantId, allTenants, from, limit, filter);
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
  const events = rows.map(toEvent);
  const last = events.at(-1);
  return { events, cursor: last ? last.cursor : encodeEventCursor(from) };
}

function toEvent(row: EventRow): ComputeEvent {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    subject: row.subject,
    type: row.type,
    data: row.data,
    at: row.at,
    cursor: encodeEventCursor({ txId: row.tx_id, seq: String(row.seq) }),
  };
}

interface EventFilter {
  subjectPrefix: string | null;
  types: string[] | null;
}

function checkFilter(input: ReadEventsInput): EventFilter | undefined {
  const { subjectPrefix, types } = input;
  if (subjectPrefix !== undefined) {
    if (typeof subjectPrefix !== 'string' || subjectPrefix.length === 0 || subjectPrefix.length > 512) {
      throw new ComputeError('INVALID_INPUT', 'subjectPrefix must be a string of 1 to 512 characters', {
        details: { path: ['subjectPrefix'] },
      });
    }
    assertStorableText(subjectPrefix, ['subjectPrefix']);
  }
  if (types !== undefined) {
    if (!Array.isArray(types) || types.length === 0 || types.length > MAX_EVENT_TYPES) {
      throw new ComputeError('INVALID_INPUT', `types must be a list of 1 to ${MAX_EVENT_TYPES} event types`, {
        details: { path: ['types'] },
      });
    }
    types.forEach((type, i) => {
      if (typeof type !== 'string' || type.length === 0 || type.length > 256) {
        throw new ComputeError('INVALID_INPUT', 'an event type is a string of 1 to 256 characters', {
          details: { path: ['types', i] },
        });
      }
      assertStorableText(type, ['types', i]);
    });
  }
  if (subjectPrefix === undefined && types === undefined) return undefined;
  return { subjectPrefix: subjectPrefix ?? null, types: types === undefined ? null : [...new Set(types)] };
}

interface ScanInput {
  tenantId: string;
  allTenants: boolean;
  /** Forwards from this position, or backwards from the end when undefined. */
  from: EventPosition | undefined;
  /** How many events are looked at. */
  scan: number;
  /** How many matching events are kept. */
  limit: number;
  filter: EventFilter | undefined;
}

/**
 * One statement: looks at `scan` events past `from` (or the newest `scan`, backwards from the end of what is safe to
 * read), keeps the first `limit` that match the filter (the newest, going backwards), and names the newest event
 * looked at. The hits come back oldest first.
 */
async function scanEvents(sql: SqlExecutor, input: ScanInput): Promise<{ hits: EventRow[]; newest?: EventRow }> {
  const order = input.from ? 'tx_id, seq' : 'tx_id DESC, seq DESC';
  const params: unknown[] = [input.limit, input.scan, input.filter?.subjectPrefix ?? null, input.filter?.types ?? null];
  const where: string[] = ['tx_id < pg_snapshot_xmin(pg_current_snapshot())'];
  if (!input.allTenants) where.push(`tenant_id = $${params.push(input.tenantId)}`);
  if (input.from) {
    where.push(`(tx_id, seq) > ($${params.push(input.from.txId)}::xid8, $${params.push(input.from.seq)}::bigint)`);
  }
  const { rows } = await sql.query<EventRow & { hit: boolean }>(
    `WITH scanned AS (
       SELECT seq, tx_id, id, tenant_id, subject, type, data, at FROM events
       WHERE ${where.join(' AND ')}
       ORDER BY ${order} LIMIT $2
     ), hits AS (
       SELECT * FROM scanned
       WHERE ($3::text IS NULL OR starts_with(subject, $3::text)) AND ($4::text[] IS NULL OR type = ANY($4::text[]))
       ORDER BY ${order} LIMIT $1
     ), newest AS (
       SELECT * FROM scanned ORDER BY tx_id DESC, seq DESC LIMIT 1
     )
     SELECT true AS hit, seq, tx_id::text AS tx_id, id, tenant_id, subject, type, data, at FROM hits
     UNION ALL
     SELECT false AS hit, seq, tx_id::text AS tx_id, id, tenant_id, subject, type, data, at FROM newest`,
    params,
  );
  const hits = rows.filter((row) => row.hit).sort(comparePositions);
  const newest = rows.find((row) => !row.hit);
  return newest ? { hits, newest } : { hits };
}

const positionOf = (row: EventRow): EventPosition => ({ txId: row.tx_id, seq: String(row.seq) });

/**
 * A filtered read looks at up to `limit × FILTER_SCAN_FACTOR` events past the cursor in one statement and returns the
 * first `limit` that match. When fewer match, the cursor is the last event looked at, so a read of a rare subject
 * moves on through the outbox instead of starting over each time; an empty page may therefore still move the cursor.
 */
async function readFiltered(
  sql: SqlExecutor,
  tenantId: string,
  allTenants: boolean,
  from: EventPosition,
  limit: number,
  filter: EventFilter,
): Promise<EventsPage> {
  const scan = limit * FILTER_SCAN_FACTOR;
  const { hits, newest } = await scanEvents(sql, { tenantId, allTenants, from, scan, limit, filter });
  const events = hits.map(toEvent);
  const last = events.at(-1);
  // A full page ends at its last event (events after it were not looked at); a short one at the last event looked at.
  let cursor: string;
  if (events.length === limit && last) cursor = last.cursor;
  else cursor = encodeEventCursor(newest ? positionOf(newest) : from);
  return { events, cursor };
}

/**
 * The newest `limit` events (matching the filter, among the newest `max(FROM_END_SCAN_EVENTS, limit ×
 * FILTER_SCAN_FACTOR)` when there is one) in one statement, read backwards from the end of what is safe to read; the
 * cursor is the newest event looked at, so a read on from it misses nothing that commits later.
 */
async function readNewest(
  sql: SqlExecutor,
  tenantId: string,
  allTenants: boolean,
  limit: number,
  filter: EventFilter | undefined,
): Promise<EventsPage> {
  const scan = filter ? Math.max(FROM_END_SCAN_EVENTS, limit * FILTER_SCAN_FACTOR) : limit;
  const { hits, newest } = await scanEvents(sql, { tenantId, allTenants, from: undefined, scan, limit, filter });
  return { events: hits.map(toEvent), cursor: encodeEventCursor(newest ? positionOf(newest) : START_POSITION) };
}

function comparePositions(a: EventRow, b: EventRow): number {
  const ta = BigInt(a.tx_id);
  const tb = BigInt(b.tx_id);
  if (ta !== tb) return ta < tb ? -1 : 1;
  return Number(a.seq) - Number(b.seq);
}
