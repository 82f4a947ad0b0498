import type { Logger, SqlDatabase } from '@better-compute/core';
import { COMMANDS_CHANNEL } from '@better-compute/core/kernel';
import { createLastingListen } from './lasting-listen';

/** How one wait ended: a command for the node was enqueued, the time ran out, or the client went away. */
export type WaitOutcome = 'woken' | 'timeout' | 'aborted';

/** One long poll's place in the queue of its node: register before polling, so a command enqueued meanwhile wakes it. */
export interface CommandWaiter {
  /** Resolves when woken (at once if a wake came since register), after `ms`, or when `signal` aborts. */
  wait(ms: number, signal?: AbortSignal): Promise<WaitOutcome>;
  /** Leaves the node's waiters; idempotent. */
  release(): void;
}

/** The long-poll waiters of every node, woken by the NOTIFY every new command sends on `COMMANDS_CHANNEL`. */
export interface CommandWaiters {
  /**
   * Starts listening (once; later calls share the first). A database that cannot listen is logged, not fatal, and
   * tried again by a call at least 5 s later.
   */
  listen(): Promise<void>;
  register(nodeId: string): CommandWaiter;
  /** Wakes every waiter of the node (what a notification does). */
  wake(nodeId: string): void;
  /** How many waiters are registered. */
  count(): number;
  /** Stops listening and ends every wait as `aborted`. */
  close(): Promise<void>;
}

interface Entry {
  woken: boolean;
  done?: (outcome: WaitOutcome) => void;
}

/**
 * The in-memory map node → waiters of the agent API's long poll, listening on `COMMANDS_CHANNEL` (one LISTEN for the
 * whole process). A notification wakes the node's waiters; each waiter still re-checks on its own timer, so nothing
 * depends on a notification.
 *
 * @example
 * ```ts
 * const waiters = createCommandWaiters(compute.database, log);
 * await waiters.listen();
 * const waiter = waiters.register(nodeId);
 * try {
 *   if ((await poll()).length === 0) await waiter.wait(5_000, request.signal);
 * } finally {
 *   waiter.release();
 * }
 * ```
 */
export function createCommandWaiters(database: SqlDatabase, log: Logger): CommandWaiters {
  const byNode = new Map<string, Set<Entry>>();
  let closed = false;

  function wake(nodeId: string): void {
    for (const entry of byNode.get(nodeId) ?? []) {
      entry.woken = true;
      entry.done?.('woken');
    }
  }

  function wakeAll(): void {
    for (const nodeId of byNode.keys()) wake(nodeId);
  }

  // Listening again after the connection was lost (or after a failed first try): what was notified meanwhile is gone,
  // so every held poll looks again now instead of at its re-check.
  const commands = createLastingListen({
    database,
    channel: COMMANDS_CHANNEL,
    onNotify: wake,
    onListen: wakeAll,
    log,
    failure: 'long polls re-check on their timer',
  });

  function remove(nodeId: string, entry: Entry): void {
    const set = byNode.get(nodeId);
    if (!set) return;
    set.delete(entry);
    if (set.size === 0) byNode.delete(nodeId);
  }

  return {
    listen: () => commands.ensure(),

    register(nodeId) {
      const entry: Entry = { woken: false };
      let set = byNode.get(nodeId);
      if (!set) {
        set = new Set();
        byNode.set(nodeId, set);
      }
      set.add(entry);
      return {
        wait(ms, signal) {
          if (closed || signal?.aborted) return Promise.resolve('aborted');
          if (entry.woken) return Promise.resolve('woken');
          return new Promise<WaitOutcome>((resolve) => {
            const finish = (outcome: WaitOutcome) => {
              clearTimeout(timer);
              signal?.removeEventListener('abort', onAbort);
              entry.done = undefined;
              resolve(outcome);
            };
            const onAbort = () => finish('aborted');
            const timer = setTimeout(() => finish('timeout'), Math.max(0, ms));
            signal?.addEventListener('abort', onAbort, { once: true });
            entry.done = finish;
          });
        },
        release() {
          entry.done?.('aborted');
          remove(nodeId, entry);
        },
      };
    },

    wake,

    count() {
      let total = 0;
      for (const set of byNode.values()) total += set.size;
      return total;
    },

    async close() {
      closed = true;
      for (const set of byNode.values()) for (const entry of set) entry.done?.('aborted');
      byNode.clear();
      await commands.close();
    },
  };
}
