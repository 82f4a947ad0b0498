import * as v from 'valibot';
import { ComputeError } from '../errors';
import { storableTextProblem } from '../json/storable-text';

/** An id or name in a core API input: a non-empty string of at most `max` characters. */
export function textSchema(field: string, max = 512) {
  return v.pipe(
    v.string(`${field} must be a string`),
    v.minLength(1, `${field} must not be empty`),
    v.maxLength(max, `${field} must be at most ${max} characters`),
  );
}

/** `limit` of a listing: a whole number from 1 to `max`, `fallback` when left out. */
export function limitSchema(max: number, fallback: number) {
  return v.optional(
    v.pipe(
      v.number('limit must be a number'),
      v.integer('limit must be a whole number'),
      v.minValue(1, 'limit must be at least 1'),
      v.maxValue(max, `limit must be at most ${max}`),
    ),
    fallback,
  );
}

/** `cursor` of a listing: what a previous page returned as `nextCursor`. */
export const cursorSchema = v.optional(v.pipe(v.string('cursor must be a string'), v.minLength(1), v.maxLength(2048)));

// created_at as a listing prints it (microseconds, UTC), so a cursor compares exactly with the column.
const CREATED_KEY = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/** The SQL expression printing a timestamptz column as a listing cursor's time. */
export const createdKeySql = (column: string) =>
  `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

function invalidCursor(): ComputeError {
  return new ComputeError('INVALID_INPUT', 'cursor is not a cursor this listing returned', {
    details: { path: ['cursor'], reason: 'invalid-cursor' },
  });
}

/** An opaque cursor after `(createdKey, id)` of `listing`, newest first. */
export function encodeListCursor(listing: string, createdKey: string, id: string): string {
  return Buffer.from(JSON.stringify({ l: listing, t: createdKey, i: id }), 'utf8').toString('base64url');
}

/**
 * Decodes what {@link encodeListCursor} made for `listing`; anything else (another listing's cursor, a part its column
 * could not hold) is INVALID_INPUT at `['cursor']`, `invalid-cursor`, never a failed cast inside PostgreSQL.
 */
export function decodeListCursor(cursor: string, listing: string): { createdKey: string; id: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalidCursor();
  }
  if (typeof parsed !== 'object' || parsed === null) throw invalidCursor();
  const { l, t, i } = parsed as Record<string, unknown>;
  if (l !== listing || typeof t !== 'string' || !CREATED_KEY.test(t) || t.startsWith('0000')) throw invalidCursor();
  const millis = `${t.slice(0, 23)}Z`;
  const at = new Date(millis);
  if (Number.isNaN(at.getTime()) || at.toISOString() !== millis) throw invalidCursor();
  if (typeof i !== 'string' || i.length === 0 || i.length > 512 || storableTextProblem(i) !== undefined) {
    throw invalidCursor();
  }
  return { createdKey: t, id: i };
}
