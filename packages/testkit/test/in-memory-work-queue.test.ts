import { ComputeError, type SqlExecutor } from '@better-compute/core';
import { addMs, URGENT_LEAD_MS } from '@better-compute/core/kernel';
import { describe, expect, it } from 'vitest';
import { createFakeClock, createInMemoryWorkQueue } from '../src';
import { rejection } from './support/harness';

// The in-memory queue ignores its transaction; any executor will do.
const tx = {} as SqlExecutor;

describe('createInMemoryWorkQueue', () => {
  it('queues an item due at the clock’s now when notBefore is omitted', async () => {
    const clock = createFakeClock();
    const work = createInMemoryWorkQueue(clock);
    await work.enqueue(tx, { kind: 'workflow', key: 'node_1' });
    expect(work.items()).toEqual([{ kind: 'workflow', key: 'node_1', notBefore: clock.now() }]);
  });

  it('keeps one entry per (kind, key) with the earliest notBefore, whichever order they come in', async () => {
    const clock = createFakeClock();
    const work = createInMemoryWorkQueue(clock);
    const soon = addMs(clock.now(), 1_000);
    const later = addMs(clock.now(), 60_000);
    await work.enqueue(tx, { kind: 'workflow', key: 'a', notBefore: later });
    await work.enqueue(tx, { kind: 'workflow', key: 'a', notBefore: soon });
    await work.enqueue(tx, { kind: 'workflow', key: 'b', notBefore: soon });
    await work.enqueue(tx, { kind: 'workflow', key: 'b', notBefore: later });
    expect(work.items()).toEqual([
      { kind: 'workflow', key: 'a', notBefore: soon },
      { kind: 'workflow', key: 'b', notBefore: soon },
    ]);
  });

  it('keeps different kinds of one key apart', async () => {
    const work = createInMemoryWorkQueue(createFakeClock());
    await work.enqueue(tx, { kind: 'workflow', key: 'a' });
    await work.enqueue(tx, { kind: 'health', key: 'a' });
    expect(work.items().map((item) => item.kind)).toEqual(['health', 'workflow']);
  });

  it('lists items earliest first', async () => {
    const clock = createFakeClock();
    const work = createInMemoryWorkQueue(clock);
    await work.enqueue(tx, { kind: 'k', key: 'late', notBefore: addMs(clock.now(), 10) });
    await work.enqueue(tx, { kind: 'k', key: 'early', notBefore: clock.now() });
    expect(work.items().map((item) => item.key)).toEqual(['early', 'late']);
  });

  it('lists an urgent item as the kernel claims it: ahead of routine items due less than URGENT_LEAD_MS before', async () => {
    const clock = createFakeClock();
    const work = createInMemoryWorkQueue(clock);
    await work.enqueue(tx, { kind: 'k', key: 'old', notBefore: addMs(clock.now(), -URGENT_LEAD_MS - 1) });
    await work.enqueue(tx, { kind: 'k', key: 'recent', notBefore: addMs(clock.now(), -URGENT_LEAD_MS + 1) });
    await work.enqueue(tx, { kind: 'k', key: 'result', urgent: true });
    // A later routine enqueue of the same item keeps it urgent.
    await work.enqueue(tx, { kind: 'k', key: 'result', notBefore: addMs(clock.now(), 5) });
    expect(work.takeDue().map((item) => [item.key, item.urgent ?? false])).toEqual([
      ['old', false],
      ['result', true],
      ['recent', false],
    ]);
  });

  it('takeDue removes and returns only the items due now', async () => {
    const clock = createFakeClock();
    const work = createInMemoryWorkQueue(clock);
    await work.enqueue(tx, { kind: 'k', key: 'now' });
    await work.enqueue(tx, { kind: 'k', key: 'later', notBefore: addMs(clock.now(), 5_000) });
    expect(work.takeDue().map((item) => item.key)).toEqual(['now']);
    expect(work.items().map((item) => item.key)).toEqual(['later']);
    expect(work.takeDue()).toEqual([]);
    clock.advance(5_000);
    expect(work.takeDue().map((item) => item.key)).toEqual(['later']);
    expect(work.items()).toEqual([]);
  });

  it('takeDue takes an explicit time', async () => {
    const clock = createFakeClock();
    const work = createInMemoryWorkQueue(clock);
    await work.enqueue(tx, { kind: 'k', key: 'later', notBefore: addMs(clock.now(), 5_000) });
    expect(work.takeDue(addMs(clock.now(), 5_000)).map((item) => item.key)).toEqual(['later']);
  });

  it('clear forgets everything', async () => {
    const work = createInMemoryWorkQueue(createFakeClock());
    await work.enqueue(tx, { kind: 'k', key: 'a' });
    work.clear();
    expect(work.items()).toEqual([]);
  });

  it('refuses bad input as the kernel does, with the path', async () => {
    const work = createInMemoryWorkQueue(createFakeClock());
    const cases: [unknown, string][] = [
      [{ kind: '', key: 'a' }, 'kind'],
      [{ kind: 'k', key: 'x'.repeat(513) }, 'key'],
      [{ kind: 'k', key: 7 }, 'key'],
      [{ kind: 'k', key: 'a', notBefore: new Date(Number.NaN) }, 'notBefore'],
      [{ kind: 'k', key: 'a', notBefore: '2026-03-01' }, 'notBefore'],
      [{ kind: 'k', key: 'a', urgent: 1 }, 'urgent'],
    ];
    for (const [request, path] of cases) {
      const err = await rejection(work.enqueue(tx, request as never));
      expect(err).toBeInstanceOf(ComputeError);
      expect((err as ComputeError).code).toBe('INVALID_INPUT');
      expect((err as ComputeError).details.path).toEqual([path]);
    }
    expect(work.items()).toEqual([]);
  });

  it('hands out copies of its items', async () => {
    const clock = createFakeClock();
    const work = createInMemoryWorkQueue(clock);
    await work.enqueue(tx, { kind: 'k', key: 'a' });
    work.items()[0]?.notBefore.setTime(0);
    expect(work.items()[0]?.notBefore).toEqual(clock.now());
  });
});
