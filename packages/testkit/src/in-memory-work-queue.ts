import { type Clock, ComputeError, type SqlExecutor, type WorkQueue, type WorkRequest } from '@better-compute/core';
import { checkWorkRequest } from '@better-compute/core/conformance';
import { URGENT_LEAD_MS } from '@better-compute/core/kernel';

/**
 * One queued item of an {@link InMemoryWorkQueue}.
 *
 * @example
 * ```ts
 * const [item]: InMemoryWorkItem[] = work.takeDue();
 * ```
 */
export interface InMemoryWorkItem {
  kind: string;
  key: string;
  notBefore: Date;
  /** Present (true) only when an enqueue asked for it. */
  urgent?: true;
}

/**
 * A {@link WorkQueue} kept in memory, with test-side helpers to look at and take what was queued.
 *
 * @example
 * ```ts
 * const work: InMemoryWorkQueue = createInMemoryWorkQueue(clock);
 * await reconcileThing('node_1', { ...compute.context, work });
 * expect(work.items()).toEqual([{ kind: 'workflow', key: 'node_1', notBefore: clock.now() }]);
 * ```
 */
export interface InMemoryWorkQueue extends WorkQueue {
  /**
   * Every queued item in claim order, as the kernel's queue claims them: earliest `notBefore` first, an urgent item as
   * if due `URGENT_LEAD_MS` earlier (then kind, then key); copies, so changing them changes nothing.
   */
  items(): InMemoryWorkItem[];
  /** Removes and returns the items due at `now` (default the clock's now), in the order of {@link items}. */
  takeDue(now?: Date): InMemoryWorkItem[];
  /** Forgets every item. */
  clear(): void;
}

function requireDate(value: unknown, path: string): Date {
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) {
    throw new ComputeError('INVALID_INPUT', `work ${path} must be a valid Date`, { details: { path: [path] } });
  }
  return value;
}

function claimOrder(item: InMemoryWorkItem): number {
  return item.notBefore.getTime() - (item.urgent ? URGENT_LEAD_MS : 0);
}

function compare(a: InMemoryWorkItem, b: InMemoryWorkItem): number {
  const byTime = claimOrder(a) - claimOrder(b);
  if (byTime !== 0) return byTime;
  if (a.kind !== b.kind) return a.kind < b.kind ? -1 : 1;
  if (a.key !== b.key) return a.key < b.key ? -1 : 1;
  return 0;
}

/**
 * Makes an {@link InMemoryWorkQueue}: one entry per `(kind, key)` keeping the earliest `notBefore` (the clock's now
 * when omitted) and `urgent` once any enqueue asked for it, with the kernel's input checks (kind and key non-empty
 * strings of at most 512 characters PostgreSQL can store, `notBefore` a valid Date, `urgent` a boolean; otherwise
 * INVALID_INPUT with `details.path`). It passes the kernel's work queue behaviour suite (`defineWorkQueueBehaviour` of
 * `@better-compute/core/conformance`).
 *
 * It ignores the transaction it is given: an enqueue is recorded at once and nothing rolls it back when that
 * transaction does. Use it for unit tests of one step or reconciler; use the kernel's queue (a real `betterCompute`)
 * wherever a rollback must take the enqueue with it.
 *
 * @example
 * ```ts
 * const work = createInMemoryWorkQueue(clock);
 * await work.enqueue(tx, { kind: 'workflow', key: 'node_1', notBefore: addMs(clock.now(), 5_000) });
 * await work.enqueue(tx, { kind: 'workflow', key: 'node_1' }); // earlier: wins
 * work.takeDue(); // [{ kind: 'workflow', key: 'node_1', notBefore: <now> }]
 * ```
 */
export function createInMemoryWorkQueue(clock: Clock): InMemoryWorkQueue {
  const queued = new Map<string, InMemoryWorkItem>();
  const id = (kind: string, key: string) => JSON.stringify([kind, key]);
  const copy = (item: InMemoryWorkItem): InMemoryWorkItem => ({ ...item, notBefore: new Date(item.notBefore) });
  const sorted = () => [...queued.values()].sort(compare);

  return {
    async enqueue(_tx: SqlExecutor, request: WorkRequest): Promise<void> {
      // The kernel's own checks, so the fake refuses exactly what the real queue refuses.
      const checked = checkWorkRequest(request, clock.now());
      const { kind, key } = checked;
      const notBefore = new Date(checked.notBefore);
      const existing = queued.get(id(kind, key));
      const earliest = existing && existing.notBefore.getTime() <= notBefore.getTime() ? existing.notBefore : notBefore;
      const urgent = existing?.urgent === true || checked.urgent;
      queued.set(
        id(kind, key),
        urgent ? { kind, key, notBefore: earliest, urgent } : { kind, key, notBefore: earliest },
      );
    },
    items: () => sorted().map(copy),
    takeDue(now?: Date): InMemoryWorkItem[] {
      const at = (now === undefined ? clock.now() : requireDate(now, 'now')).getTime();
      const due = sorted().filter((item) => item.notBefore.getTime() <= at);
      for (const item of due) queued.delete(id(item.kind, item.key));
      return due.map(copy);
    },
    clear: () => queued.clear(),
  };
}
