import { ComputeError } from '@better-compute/core';
import { storableTextProblem } from '@better-compute/core/checks';

/** The page size `metal.list` uses when none is given. */
export const METAL_DEFAULT_LIMIT = 50;

/** The largest page `metal.list` returns; a larger `limit` is INVALID_INPUT. */
export const METAL_MAX_LIMIT = 100;

const LISTING = 'metal.machines';
// created_at as the listing prints it: microseconds, UTC, so a cursor compares exactly with the column.
const CREATED_KEY = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

function invalidCursor(listing = 'metal.list'): ComputeError {
  return new ComputeError('INVALID_INPUT', `cursor is not a cursor ${listing} returned`, {
    details: { path: ['cursor'], reason: 'invalid-cursor' },
  });
}

/** The position after a page's last machine: its creation time (as the listing prints it) and node id. */
export interface MachineCursor {
  createdKey: string;
  nodeId: string;
}

/** An opaque cursor for the machine after `position` (base64url JSON, tagged with the listing). */
export function encodeMachineCursor(position: MachineCursor): string {
  return Buffer.from(JSON.stringify({ l: LISTING, t: position.createdKey, n: position.nodeId }), 'utf8').toString(
    'base64url',
  );
}

function isCreatedKey(value: unknown): value is string {
  if (typeof value !== 'string' || !CREATED_KEY.test(value) || value.startsWith('0000')) return false;
  const millis = `${value.slice(0, 23)}Z`;
  const at = new Date(millis);
  // A date that does not exist rolls over in JavaScript: only one that reads back unchanged can reach the column.
  return !Number.isNaN(at.getTime()) && at.toISOString() === millis;
}

/**
 * Decodes what {@link encodeMachineCursor} made; anything else (another listing's cursor, a forged part the columns
 * could not hold) is INVALID_INPUT at `['cursor']`, never a failed cast inside PostgreSQL.
 */
export function decodeMachineCursor(cursor: string): MachineCursor {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalidCursor();
  }
  if (typeof parsed !== 'object' || parsed === null) throw invalidCursor();
  const { l, t, n } = parsed as Record<string, unknown>;
  if (l !== LISTING || !isCreatedKey(t)) throw invalidCursor();
  if (typeof n !== 'string' || n.length === 0 || n.length > 512 || storableTextProblem(n) !== undefined) {
    throw invalidCursor();
  }
  return { createdKey: t, nodeId: n };
}

const SITES_LISTING = 'metal.sites';

/** The position after a page's last site of `sites.list`: its creation time (as the listing prints it) and id. */
export interface SiteCursor {
  createdKey: string;
  siteId: string;
}

/** An opaque cursor for the site after `position` (base64url JSON, tagged with the listing). */
export function encodeSiteCursor(position: SiteCursor): string {
  return Buffer.from(JSON.stringify({ l: SITES_LISTING, t: position.createdKey, s: position.siteId }), 'utf8').toString(
    'base64url',
  );
}

/** Decodes what {@link encodeSiteCursor} made; anything else is INVALID_INPUT at `['cursor']`. */
export function decodeSiteCursor(cursor: string): SiteCursor {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalidCursor('sites.list');
  }
  if (typeof parsed !== 'object' || parsed === null) throw invalidCursor('sites.list');
  const { l, t, s } = parsed as Record<string, unknown>;
  if (l !== SITES_LISTING || !isCreatedKey(t)) throw invalidCursor('sites.list');
  if (typeof s !== 'string' || s.length === 0 || s.length > 512 || storableTextProblem(s) !== undefined) {
    throw invalidCursor('sites.list');
  }
  return { createdKey: t, siteId: s };
}
