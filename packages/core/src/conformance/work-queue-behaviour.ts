import type { SqlExecutor } from '../sql/executor';
import type { WorkQueue } from '../work/types';
import type { ConformanceRunner } from './runner';

/**
 * One queued item as a {@link WorkQueueSubject} reports it.
 *
 * @example
 * ```ts
 * const item: QueuedWork = { kind: 'workflow', key: 'node_a', notBefore: clock.now(), urgent: false };
 * ```
 */
export interface QueuedWork {
  kind: string;
  key: string;
  notBefore: Date;
  urgent: boolean;
}

/**
 * One fresh (empty) {@link WorkQueue} under test, with its clock, the way to run its enqueues, and what it holds.
 *
 * @example
 * ```ts
 * const subject: WorkQueueSubject = { queue: work, transaction: (fn) => fn(sql), clock,
 *   items: async () => work.items().map((i) => ({ ...i, urgent: i.urgent === true })) };
 * ```
 */
export interface WorkQueueSubject {
  queue: WorkQueue;
  /** Runs `fn` as the queue's writes run: in a transaction for the kernel's queue, directly for a fake. */
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  /** The queue's clock: an enqueue without `notBefore` is due at its now. */
  clock: { now(): Date };
  /** Every item queued, in any order. */
  items(): Promise<QueuedWork[]>;
}

/**
 * Makes the (empty) {@link WorkQueueSubject} for one test.
 *
 * @example
 * ```ts
 * const harness: WorkQueueHarness = async () => inMemorySubject();
 * ```
 */
export type WorkQueueHarness = () => Promise<WorkQueueSubject>;

/**
 * The work queue's behaviour through the {@link WorkQueue} port alone (what `enqueue` keeps and what it refuses), for
 * any implementation: the kernel's queue runs it on each backend and the testkit's in-memory queue runs it too, so
 * the two cannot drift. Claims, shards, leases and reconcilers are the kernel's own suites.
 *
 * @example
 * ```ts
 * import { beforeEach, describe, expect, it } from 'vitest';
 * defineWorkQueueBehaviour({ describe, it, beforeEach, expect }, async () => makeSubject());
 * ```
 */
export function defineWorkQueueBehaviour(t: ConformanceRunner, harness: WorkQueueHarness): void {
  const { describe, it, beforeEach, expect } = t;
  let s: WorkQueueSubject;
  const enqueue = (kind: string, key: string, notBefore?: Date) =>
    s.transaction((tx) => s.queue.enqueue(tx, { kind, key, ...(notBefore ? { notBefore } : {}) }));
  const at = (ms: number) => new Date(s.clock.now().getTime() + ms);
  const sorted = async () =>
    (await s.items()).sort((a, b) => (a.kind === b.kind ? (a.key < b.key ? -1 : 1) : a.kind < b.kind ? -1 : 1));

  describe('work queue behaviour', () => {
    beforeEach(async () => {
      s = await harness();
    });

    it('keeps one item per (kind, key) with the earliest notBefore (its clock’s now when omitted); urgent sticks', async () => {
      await enqueue('workflow', 'node_a', at(10_000));
      await enqueue('workflow', 'node_a', at(5_000));
      await enqueue('workflow', 'node_a', at(20_000));
      await enqueue('health', 'node_a');
      await s.transaction((tx) => s.queue.enqueue(tx, { kind: 'wake', key: 'node_b', urgent: true }));
      // A routine enqueue does not clear a pending urgent wake.
      await enqueue('wake', 'node_b', at(-1_000));
      expect(await sorted()).toEqual([
        { kind: 'health', key: 'node_a', notBefore: s.clock.now(), urgent: false },
        { kind: 'wake', key: 'node_b', notBefore: at(-1_000), urgent: true },
        { kind: 'workflow', key: 'node_a', notBefore: at(5_000), urgent: false },
      ]);
    });

    it('refuses a bad request with INVALID_INPUT naming the field, and writes nothing', async () => {
      await expect(enqueue('', 'k')).rejects.toMatchObject({ code: 'INVALID_INPUT', details: { path: ['kind'] } });
      await expect(
        s.transaction((tx) => s.queue.enqueue(tx, { kind: 'k', key: 7 as unknown as string })),
      ).rejects.toMatchObject({ code: 'INVALID_INPUT', details: { path: ['key'] } });
      await expect(enqueue('k', 'k', new Date('nope'))).rejects.toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['notBefore'] },
      });
      await expect(
        s.transaction((tx) => s.queue.enqueue(tx, { kind: 'k', key: 'k', urgent: 'yes' as unknown as boolean })),
      ).rejects.toMatchObject({ code: 'INVALID_INPUT', details: { path: ['urgent'] } });
      // PostgreSQL cannot store a NUL or a lone surrogate: the caller's mistake, not an INTERNAL error.
      await expect(enqueue('k\u0000', 'k')).rejects.toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['kind'] },
      });
      await expect(enqueue('k', '\uD800k')).rejects.toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['key'] },
      });
      expect(await s.items()).toHaveLength(0);
    });
  });
}
