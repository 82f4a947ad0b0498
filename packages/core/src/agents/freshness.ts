import { ComputeError } from '../errors';
import type { SessionFreshness } from './types';

/** How long a session stays connected without a touch, unless the caller says otherwise. */
export const DEFAULT_SESSION_STALE_AFTER_MS = 60_000;

/** The instant at or before which a session's last touch makes it stale; bad input is INVALID_INPUT with the path. */
export function staleBefore(freshness: SessionFreshness): Date {
  const { now } = freshness ?? {};
  if (!(now instanceof Date) || Number.isNaN(now.getTime())) {
    throw new ComputeError('INVALID_INPUT', 'now must be a valid Date', { details: { path: ['now'] } });
  }
  const staleAfterMs = freshness.staleAfterMs ?? DEFAULT_SESSION_STALE_AFTER_MS;
  if (!Number.isFinite(staleAfterMs) || staleAfterMs <= 0) {
    throw new ComputeError('INVALID_INPUT', 'staleAfterMs must be positive', { details: { path: ['staleAfterMs'] } });
  }
  return new Date(now.getTime() - staleAfterMs);
}
