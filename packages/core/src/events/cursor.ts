import { ComputeError } from '../errors';

/** A position in the outbox: the writing transaction's id and the row's sequence number, both as decimal text. */
export interface EventPosition {
  txId: string;
  seq: string;
}

const PREFIX = 'ev1.';
const DECIMAL = /^(0|[1-9][0-9]{0,19})$/;

/**
 * Encodes a position as an opaque cursor string.
 *
 * @example
 * ```ts
 * encodeEventCursor({ txId: '812', seq: '40' }); // 'ev1.ODEyLjQw'
 * ```
 */
export function encodeEventCursor(position: EventPosition): string {
  return PREFIX + Buffer.from(`${position.txId}.${position.seq}`, 'utf8').toString('base64url');
}

/**
 * Decodes a cursor made by {@link encodeEventCursor}; anything else is INVALID_INPUT at `path`.
 *
 * @example
 * ```ts
 * decodeEventCursor(page.cursor, ['after']); // { txId: '812', seq: '40' }
 * ```
 */
export function decodeEventCursor(cursor: unknown, path: readonly (string | number)[] = ['after']): EventPosition {
  const malformed = () => new ComputeError('INVALID_INPUT', 'malformed event cursor', { details: { path } });
  if (typeof cursor !== 'string' || !cursor.startsWith(PREFIX) || cursor.length > 128) throw malformed();
  const body = cursor.slice(PREFIX.length);
  if (!/^[A-Za-z0-9_-]+$/.test(body)) throw malformed();
  const [txId, seq, ...rest] = Buffer.from(body, 'base64url').toString('utf8').split('.');
  if (rest.length > 0 || txId === undefined || seq === undefined || !DECIMAL.test(txId) || !DECIMAL.test(seq)) {
    throw malformed();
  }
  // A cursor must re-encode to itself, so two spellings never name one position.
  if (encodeEventCursor({ txId, seq }) !== cursor) throw malformed();
  return { txId, seq };
}

/** The position before every event. */
export const START_POSITION: EventPosition = Object.freeze({ txId: '0', seq: '0' });
