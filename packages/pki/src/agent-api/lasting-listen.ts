import type { Logger, SqlDatabase } from '@better-compute/core';

/**
 * How long after a LISTEN failed the next `ensure()` tries again: 5 s.
 *
 * @example
 * ```ts
 * createLastingListen({ database, channel, onNotify, onListen, log, failure, retryMs: LISTEN_RETRY_MS * 2 });
 * ```
 */
export const LISTEN_RETRY_MS = 5_000;

/** What {@link createLastingListen} takes. */
export interface LastingListenOptions {
  database: SqlDatabase;
  channel: string;
  onNotify(payload: string): void;
  /**
   * Called each time the LISTEN is in place: once it first is, and again whenever the driver re-established it after
   * losing its connection (what was notified meanwhile is gone, so whatever was kept on the strength of it must be
   * looked at again).
   */
  onListen(): void;
  log: Logger;
  /** The warning logged when a LISTEN fails (what the caller does without it). */
  failure: string;
  /** Default {@link LISTEN_RETRY_MS}. */
  retryMs?: number;
}

/** A LISTEN kept up: {@link createLastingListen}. */
export interface LastingListen {
  /** Resolves once listening, or once this attempt failed; retried by a later call after `retryMs`. */
  ensure(): Promise<void>;
  /** Whether the LISTEN is in place now. */
  listening(): boolean;
  /** Stops listening; `ensure` does nothing after it. */
  close(): Promise<void>;
}

/**
 * One LISTEN on `channel` for the process, started by the first `ensure()` and shared by every later one. A LISTEN
 * that fails (the database down at that moment) is logged and tried again by the first `ensure()` at least `retryMs`
 * later, so a blip at start does not leave the process without notifications for the rest of its life. The driver's
 * own re-listen after a lost connection calls `onListen` again.
 *
 * @example
 * ```ts
 * const changes = createLastingListen({ database, channel: 'bc_pki_certificates', onNotify: forgetSerial,
 *   onListen: forgetAll, log, failure: 'every call checks its certificate' });
 * await changes.ensure();
 * ```
 */
export function createLastingListen(options: LastingListenOptions): LastingListen {
  const { database, channel, log } = options;
  const retryMs = options.retryMs ?? LISTEN_RETRY_MS;
  let attempt: Promise<void> | undefined;
  let failedAt: number | undefined;
  let unlisten: (() => Promise<void>) | undefined;
  let closed = false;

  async function listenOnce(): Promise<void> {
    let heard = false;
    try {
      const stop = await database.listen(channel, options.onNotify, () => {
        heard = true;
        options.onListen();
      });
      if (closed) {
        await stop();
        return;
      }
      unlisten = stop;
      // PGlite's listen has no onListen: it is in place once listen resolves.
      if (!heard) options.onListen();
    } catch (error) {
      failedAt = performance.now();
      log.warn(`agent API: cannot listen on ${channel}; ${options.failure}; trying again in ${retryMs} ms`, {
        error: error instanceof Error ? error.message : String(error),
      });
    }
  }

  return {
    ensure() {
      if (closed) return Promise.resolve();
      if (attempt && failedAt !== undefined && performance.now() - failedAt >= retryMs) {
        // Cleared now, not when the new attempt ends: calls meanwhile share this attempt.
        failedAt = undefined;
        attempt = undefined;
      }
      attempt ??= listenOnce();
      return attempt;
    },

    listening: () => unlisten !== undefined,

    async close() {
      closed = true;
      await attempt;
      const stop = unlisten;
      unlisten = undefined;
      await stop?.();
    },
  };
}
