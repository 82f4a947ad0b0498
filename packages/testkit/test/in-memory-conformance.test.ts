import type { Command, SqlExecutor, WorkQueue } from '@better-compute/core';
import { defineCommandQueueBehaviour, defineWorkQueueBehaviour } from '@better-compute/core/conformance';
import { beforeEach, describe, expect, it } from 'vitest';
import { createFakeClock, createInMemoryCommandQueue, createInMemoryWorkQueue } from '../src';

// The in-memory queues ignore the transaction they are given; the suites' writes run on this directly.
const sql: SqlExecutor = {
  query: () => Promise.reject(new Error('the in-memory queues never query')),
  transaction: (fn) => fn(sql),
};

describe('createInMemoryCommandQueue passes the kernel command queue behaviour', () => {
  defineCommandQueueBehaviour({ describe, it, beforeEach, expect }, async (kinds) => {
    const clock = createFakeClock();
    const woken: { kind: string; key: string; urgent: boolean }[] = [];
    // Every wake as it is enqueued (not deduplicated), so a second wake would show.
    const work: WorkQueue = {
      enqueue: async (_tx, request) => void woken.push({ ...request, urgent: request.urgent === true }),
    };
    const queue = createInMemoryCommandQueue({ clock, work, kinds, tenantId: 'acme' });
    return {
      queue,
      sql,
      transaction: (fn) => fn(sql),
      clock,
      nodeId: 'node_a',
      succeed: (id, input): Promise<Command> => queue.succeed(id, input),
      fail: (id, reason) => queue.fail(id, reason),
      keys: async () => queue.list().map((c) => c.key),
      wakes: async () => woken.map((w) => `${w.kind}/${w.key}`),
      urgentWakes: async () => woken.filter((w) => w.urgent).length,
    };
  });
});

describe('createInMemoryWorkQueue passes the kernel work queue behaviour', () => {
  defineWorkQueueBehaviour({ describe, it, beforeEach, expect }, async () => {
    const clock = createFakeClock();
    const queue = createInMemoryWorkQueue(clock);
    return {
      queue,
      transaction: (fn) => fn(sql),
      clock,
      items: async () => queue.items().map((i) => ({ ...i, urgent: i.urgent === true })),
    };
  });
});
