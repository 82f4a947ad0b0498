import { ComputeError } from '@better-compute/core';
import { storableTextProblem } from '@better-compute/core/checks';
import * as v from 'valibot';

/** The page size a listing uses when none is given. */
export const DEFAULT_PAGE_LIMIT = 20;

/** The largest page a listing returns; a larger `limit` is INVALID_INPUT. */
export const MAX_PAGE_LIMIT = 100;

/**
 * One page of a listing, newest first for workflows. `nextCursor` is opaque; pass it back as `cursor` for the next
 * page, and it is `null` on the last page.
 *
 * @example
 * ```ts
 * let page: Page<ApiWorkflowSummary> = await compute.api.workflows.list(token, { tenantId, nodeId });
 * while (page.nextCursor) page = await compute.api.workflows.list(token, { tenantId, nodeId, cursor: page.nextCursor });
 * ```
 */
export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

/** `limit`: a whole number from 1 to {@link MAX_PAGE_LIMIT}, default {@link DEFAULT_PAGE_LIMIT}. */
export const limitSchema = v.optional(
  v.pipe(
    v.number(),
    v.integer('limit must be a whole number'),
    v.minValue(1, 'limit must be at least 1'),
    v.maxValue(MAX_PAGE_LIMIT, `limit must be at most ${MAX_PAGE_LIMIT}`),
  ),
  DEFAULT_PAGE_LIMIT,
);

/** `cursor`: what a previous page returned as `nextCursor`. */
export const cursorSchema = v.optional(v.pipe(v.string(), v.minLength(1), v.maxLength(2048)));

type CursorKey = readonly (string | number)[];

/**
 * What one part of a cursor key must be: `'s'` a text of at most 512 characters, `'n'` a whole number from 0 to
 * 2^31 - 1 (what an int4 column holds, negated too), `'t'` a timestamp as the listings print it (`2026-03-01T00:00:00.000000Z`, microseconds, UTC).
 */
export type CursorPart = 's' | 'n' | 't';

const INT4_MAX = 2_147_483_647;
const TIMESTAMP_KEY = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

// A cursor comes back from the caller, so each part is checked against what its column can hold: a forged one must be
// INVALID_INPUT, not a cast that fails inside PostgreSQL.
function isTimestampKey(part: string): boolean {
  // Year 0 exists in JavaScript but not in PostgreSQL.
  if (!TIMESTAMP_KEY.test(part) || part.startsWith('0000')) return false;
  const millis = `${part.slice(0, 23)}Z`;
  const at = new Date(millis);
  // A date that does not exist (2026-02-30) rolls over in JavaScript; only one that reads back unchanged is real.
  return !Number.isNaN(at.getTime()) && at.toISOString() === millis;
}

function partHolds(kind: CursorPart, part: unknown): boolean {
  if (kind === 'n') return Number.isSafeInteger(part) && (part as number) >= 0 && (part as number) <= INT4_MAX;
  if (typeof part !== 'string') return false;
  if (kind === 't') return isTimestampKey(part);
  return part.length <= 512 && storableTextProblem(part) === undefined;
}

function invalidCursor(): ComputeError {
  return new ComputeError('INVALID_INPUT', 'cursor is not a cursor this listing returned', {
    details: { path: ['cursor'], reason: 'invalid-cursor' },
  });
}

/**
 * Encodes the sort key of a page's last item as an opaque cursor, tagged with the listing it belongs to.
 *
 * @example
 * ```ts
 * encodeCursor('workflows', ['2026-03-01T00:00:00.000000Z', 'wf_01k…']);
 * ```
 */
export function encodeCursor(listing: string, key: CursorKey): string {
  return Buffer.from(JSON.stringify({ l: listing, k: key }), 'utf8').toString('base64url');
}

/**
 * Decodes a cursor of `listing` whose key has the given shape (see {@link CursorPart}). Anything else, including a
 * cursor of another listing or a part its column cannot hold, is INVALID_INPUT at `['cursor']`.
 *
 * @example
 * ```ts
 * const [createdAt, id] = decodeCursor(input.cursor, 'workflows', ['t', 's']) as [string, string];
 * ```
 */
export function decodeCursor(cursor: string, listing: string, shape: readonly CursorPart[]): CursorKey {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalidCursor();
  }
  if (typeof parsed !== 'object' || parsed === null) throw invalidCursor();
  const { l, k } = parsed as { l?: unknown; k?: unknown };
  if (l !== listing || !Array.isArray(k) || k.length !== shape.length) throw invalidCursor();
  shape.forEach((kind, i) => {
    if (!partHolds(kind, k[i])) throw invalidCursor();
  });
  return k as CursorKey;
}
