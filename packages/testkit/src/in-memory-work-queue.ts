import {
  assertStorableText,
  type Clock,
  ComputeError,
  type SqlExecutor,
  URGENT_LEAD_MS,
  type WorkQueue,
  type WorkRequest,
} from '@better-compute/core';

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

const MAX_TEXT = 512;

function requireText(value: unknown, field: 'kind' | 'key'): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_TEXT) {
    throw new ComputeError(
      'INVALID_INPUT',
      `work ${field} must be a non-empty string of at most ${MAX_TEXT} characters`,
      { details: { path: [field] } },
    );
  }
  // As the kernel's queue: PostgreSQL cannot store a NUL or a lone surrogate.
  assertStorableText(value, [field]);
  return value;
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
      if (typeof request !== 'object' || request === null) {
        throw new ComputeError('INVALID_INPUT', 'a work request must be an object', { details: { path: [] } });
      }
      const kind = requireText(request.kind, 'kind');
      const key = requireText(request.key, 'key');
      const notBefore = new Date(
        request.notBefore === undefined ? clock.now() : requireDate(request.notBefore, 'notBefore'),
      );
      if (request.urgent !== undefined && typeof request.urgent !== 'boolean') {
        throw new ComputeError('INVALID_INPUT', 'work urgent must be a boolean', { details: { path: ['urgent'] } });
      }
      const existing = queued.get(id(kind, key));
      const earliest = existing && existing.notBefore.getTime() <= notBefore.getTime() ? existing.notBefore : notBefore;
      const urgent = existing?.urgent === true || request.urgent === true;
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
