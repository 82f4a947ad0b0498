import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ComputeError } from '../../src/errors';
import { type ComputeEvent, createEventBus, type ReadEventsInput, readEvents, subscribeEvents } from '../../src/events';
import type { SqlExecutor } from '../../src/sql';
import type { ScratchDatabase } from '../support/databases';
import { manualClock, prepareKernel, resetKernel } from './command-queue';

/** Waits until `check` passes, polling every 10 ms, for at most 5 s. */
async function eventually(check: () => void): Promise<void> {
  const until = Date.now() + 5000;
  for (;;) {
    try {
      check();
      return;
    } catch (error) {
      if (Date.now() > until) throw error;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
}

/**
 * Waits until every transaction that began before this call has ended. Readers see an event only once every older
 * transaction of the whole server has finished (xmin is cluster-wide), so on a shared PostgreSQL another database's
 * transaction can briefly hold a just-committed event back; a test that reads at once waits for that first.
 */
export async function olderTransactionsDone(db: SqlExecutor): Promise<void> {
  const { rows } = await db.query<{ xid: string }>('SELECT pg_current_xact_id()::text AS xid');
  const until = Date.now() + 10_000;
  for (;;) {
    const check = await db.query<{ done: boolean }>(
      'SELECT pg_snapshot_xmin(pg_current_snapshot()) > $1::xid8 AS done',
      [rows[0]?.xid],
    );
    if (check.rows[0]?.done) return;
    if (Date.now() > until) throw new Error('a transaction older than the read is still running');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The events outbox contract, run once per backend. */
export function defineEventsConformance(create: () => Promise<ScratchDatabase>): void {
  let scratch: ScratchDatabase;
  let db: SqlExecutor;
  const clock = manualClock();
  const bus = createEventBus({ clock });
  const read = async (input: ReadEventsInput) => {
    await olderTransactionsDone(db);
    return readEvents(db, input);
  };
  const publish = (type: string, tenantId = 'acme', data: unknown = { type }) =>
    db.transaction((tx) => bus.publish(tx, { tenantId, subject: 'node/n1', type, data: data as never }));

  beforeAll(async () => {
    scratch = await create();
    db = scratch.db;
    await prepareKernel(db, clock);
  });
  afterAll(async () => {
    await scratch?.drop();
  });
  beforeEach(async () => {
    await resetKernel(db, clock);
  });

  describe('publish', () => {
    it('stores the event with an evt_ id, the clock time and its data', async () => {
      await publish('node.deployed', 'acme', { nodeId: 'n1', disks: [1, 2] });
      const { events } = await read({ tenantId: 'acme' });
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({
        tenantId: 'acme',
        subject: 'node/n1',
        type: 'node.deployed',
        data: { nodeId: 'n1', disks: [1, 2] },
        at: clock.now(),
      });
      expect(events[0]?.id).toMatch(/^evt_/);
    });

    it('refuses an empty subject or type and data that is not JSON, with the path', async () => {
      const cases = [
        [{ subject: '' }, ['subject']],
        [{ type: '' }, ['type']],
        [{ data: { at: new Date() } }, ['data', 'at']],
      ] as const;
      for (const [change, path] of cases) {
        const event = { tenantId: 'acme', subject: 's', type: 't', data: {}, ...change };
        await expect(db.transaction((tx) => bus.publish(tx, event as never))).rejects.toMatchObject({
          code: 'INVALID_INPUT',
          details: { path },
        });
      }
    });

    it('refuses a tenant, subject or type PostgreSQL cannot store (a NUL, a lone surrogate), with the path', async () => {
      const cases = [
        [{ tenantId: 'ac\u0000me' }, ['tenantId']],
        [{ subject: 'node/\u0000' }, ['subject']],
        [{ type: 'node.\ud800' }, ['type']],
      ] as const;
      for (const [change, path] of cases) {
        const event = { tenantId: 'acme', subject: 's', type: 't', data: {}, ...change };
        await expect(db.transaction((tx) => bus.publish(tx, event as never))).rejects.toMatchObject({
          code: 'INVALID_INPUT',
          details: { path },
        });
      }
      await expect(read({ tenantId: 'ac\u0000me' })).rejects.toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['tenantId'] },
      });
    });

    it('never shows an event whose transaction rolled back', async () => {
      await expect(
        db.transaction(async (tx) => {
          await bus.publish(tx, { tenantId: 'acme', subject: 's', type: 'lost', data: {} });
          throw new ComputeError('CONFLICT', 'abort');
        }),
      ).rejects.toMatchObject({ code: 'CONFLICT' });
      await publish('kept');
      expect((await read({ tenantId: 'acme' })).events.map((e) => e.type)).toEqual(['kept']);
    });
  });

  describe('readEvents', () => {
    it('reads only the tenant asked for, in publish order', async () => {
      await publish('a');
      await publish('x', 'globex');
      await publish('b');
      expect((await read({ tenantId: 'acme' })).events.map((e) => e.type)).toEqual(['a', 'b']);
      expect((await read({ tenantId: 'globex' })).events.map((e) => e.type)).toEqual(['x']);
    });

    it('resumes exactly after the cursor, and an empty page keeps the cursor', async () => {
      for (const type of ['a', 'b', 'c', 'd', 'e']) await publish(type);
      const first = await read({ tenantId: 'acme', limit: 2 });
      const second = await read({ tenantId: 'acme', after: first.cursor, limit: 2 });
      const third = await read({ tenantId: 'acme', after: second.cursor, limit: 2 });
      expect([first, second, third].map((page) => page.events.map((e) => e.type))).toEqual([
        ['a', 'b'],
        ['c', 'd'],
        ['e'],
      ]);
      expect(second.events[0]?.cursor).not.toBe(first.cursor);
      const empty = await read({ tenantId: 'acme', after: third.cursor });
      expect(empty).toEqual({ events: [], cursor: third.cursor });
      await publish('f');
      expect((await read({ tenantId: 'acme', after: empty.cursor })).events.map((e) => e.type)).toEqual(['f']);
    });

    it('orders events of one transaction by their sequence', async () => {
      await db.transaction(async (tx) => {
        for (const type of ['one', 'two', 'three']) {
          await bus.publish(tx, { tenantId: 'acme', subject: 's', type, data: {} });
        }
      });
      expect((await read({ tenantId: 'acme' })).events.map((e) => e.type)).toEqual(['one', 'two', 'three']);
    });

    it('fromEnd reads the newest events, oldest first, with a cursor at the end that misses nothing later', async () => {
      const empty = await read({ tenantId: 'acme', fromEnd: true });
      expect(empty.events).toEqual([]);
      for (const type of ['a', 'b', 'c', 'd', 'e']) await publish(type);
      await publish('x', 'globex');
      const newest = await read({ tenantId: 'acme', fromEnd: true, limit: 2 });
      expect(newest.events.map((e) => e.type)).toEqual(['d', 'e']);
      expect(newest.cursor).toBe(newest.events[1]?.cursor);
      // Nothing yet after the end; what is published next is read on from the cursor, once.
      expect((await read({ tenantId: 'acme', after: newest.cursor })).events).toEqual([]);
      await publish('f');
      expect((await read({ tenantId: 'acme', after: newest.cursor })).events.map((e) => e.type)).toEqual(['f']);
      // From an empty outbox, the cursor is the start: reading on from it sees everything.
      expect((await read({ tenantId: 'acme', after: empty.cursor })).events).toHaveLength(6);
      expect((await read({ tenantId: 'globex', fromEnd: true })).events.map((e) => e.type)).toEqual(['x']);
    });

    it('fromEnd with a filter: the newest matches within the last 10,000 events, the cursor past everything looked at', async () => {
      for (const type of ['keep', 'drop', 'keep', 'drop', 'keep', 'drop']) await publish(type);
      const kept = await read({ tenantId: 'acme', fromEnd: true, limit: 2, types: ['keep'] });
      expect(kept.events.map((e) => e.type)).toEqual(['keep', 'keep']);
      expect(kept.events[0]?.at.getTime()).toBeLessThanOrEqual(kept.events[1]?.at.getTime() ?? 0);
      // The newest event (a 'drop') was looked at: the cursor is past it.
      await publish('keep');
      const after = await read({ tenantId: 'acme', after: kept.cursor });
      expect(after.events.map((e) => e.type)).toEqual(['keep']);
      // A match older than limit × FILTER_SCAN_FACTOR newer events is still found (the window is 10,000 events).
      await db.transaction(async (tx) => {
        for (let i = 0; i < 40; i += 1)
          await bus.publish(tx, { tenantId: 'acme', subject: 'node/n2', type: 'noise', data: {} });
      });
      const rare = await read({ tenantId: 'acme', fromEnd: true, limit: 1, types: ['keep'] });
      expect(rare.events.map((e) => e.type)).toEqual(['keep']);
      const none = await read({ tenantId: 'acme', fromEnd: true, subjectPrefix: 'site/' });
      expect(none.events).toEqual([]);
      expect((await read({ tenantId: 'acme', after: none.cursor })).events).toEqual([]);
    });

    it('refuses fromEnd with an after cursor, or not a boolean, at fromEnd', async () => {
      const { cursor } = await read({ tenantId: 'acme' });
      for (const input of [
        { tenantId: 'acme', fromEnd: true, after: cursor },
        { tenantId: 'acme', fromEnd: 'yes' as unknown as boolean },
      ]) {
        await expect(read(input)).rejects.toMatchObject({ code: 'INVALID_INPUT', details: { path: ['fromEnd'] } });
      }
    });

    it('refuses a malformed cursor with INVALID_INPUT at after', async () => {
      const { cursor } = await read({ tenantId: 'acme' });
      for (const after of ['', 'nonsense', `${cursor}x`, 'ev1.bm90Lm51bWJlcnM', 'ev1.MS4yLjM']) {
        await expect(read({ tenantId: 'acme', after })).rejects.toMatchObject({
          code: 'INVALID_INPUT',
          details: { path: ['after'] },
        });
      }
      await expect(read({ tenantId: 'acme', limit: 0 })).rejects.toMatchObject({
        details: { path: ['limit'] },
      });
    });
  });

  describe('tenants', () => {
    it('lets root read only its own events unless it asks for every tenant', async () => {
      await publish('acme.one', 'acme');
      await publish('root.one', 'root');
      await publish('globex.one', 'globex');
      const own = await read({ tenantId: 'root' });
      expect(own.events.map((e) => e.type)).toEqual(['root.one']);
      const all = await read({ tenantId: 'root', allTenants: true, limit: 2 });
      expect(all.events.map((e) => e.type)).toEqual(['acme.one', 'root.one']);
      const rest = await read({ tenantId: 'root', allTenants: true, after: all.cursor });
      expect(rest.events.map((e) => [e.tenantId, e.type])).toEqual([['globex', 'globex.one']]);
    });

    it('refuses allTenants to any tenant but root with PERMISSION_DENIED', async () => {
      await expect(read({ tenantId: 'acme', allTenants: true })).rejects.toMatchObject({
        code: 'PERMISSION_DENIED',
        details: { path: ['allTenants'] },
      });
    });
  });

  describe('bus.subscribe', () => {
    const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

    it('delivers soon after the publishing transaction commits, nudged rather than polled', async () => {
      const live = createEventBus({ clock, db });
      const seen: string[] = [];
      // A poll interval far beyond the test's patience: only the nudge after publish can deliver in time.
      const subscription = live.subscribe((event) => void seen.push(event.type), { tenantId: 'acme', pollMs: 600_000 });
      await wait(30);
      await db.transaction((tx) => live.publish(tx, { tenantId: 'acme', subject: 's', type: 'nudged', data: {} }));
      await eventually(() => expect(seen).toEqual(['nudged']));
      await subscription.unsubscribe();
    });

    it('delivers only the tenant asked for, or every tenant when none is given', async () => {
      const live = createEventBus({ clock, db, pollMs: 20 });
      const acme: string[] = [];
      const every: string[] = [];
      const one = live.subscribe((event) => void acme.push(event.type), { tenantId: 'acme' });
      const all = live.subscribe((event) => void every.push(`${event.tenantId}:${event.type}`));
      await db.transaction(async (tx) => {
        await live.publish(tx, { tenantId: 'globex', subject: 's', type: 'g', data: {} });
        await live.publish(tx, { tenantId: 'acme', subject: 's', type: 'a', data: {} });
      });
      await eventually(() => expect(every).toEqual(['globex:g', 'acme:a']));
      await eventually(() => expect(acme).toEqual(['a']));
      await Promise.all([one.unsubscribe(), all.unsubscribe()]);
    });

    it('stops delivering after unsubscribe', async () => {
      const live = createEventBus({ clock, db, pollMs: 20 });
      const seen: string[] = [];
      const subscription = live.subscribe((event) => void seen.push(event.type), { tenantId: 'acme' });
      await subscription.unsubscribe();
      await db.transaction((tx) => live.publish(tx, { tenantId: 'acme', subject: 's', type: 'unheard', data: {} }));
      await wait(400);
      expect(seen).toEqual([]);
    });

    it('refuses to subscribe without a database with INVALID_CONFIG', () => {
      expect(() => bus.subscribe(() => undefined)).toThrow(
        expect.objectContaining({ code: 'INVALID_CONFIG', details: { path: ['db'] } }),
      );
    });
  });

  describe('subscribeEvents', () => {
    it('delivers committed events in order and resumes from a cursor', async () => {
      await publish('before');
      const seen: ComputeEvent[] = [];
      const subscription = subscribeEvents(db, (event) => void seen.push(event), { tenantId: 'acme', pollMs: 20 });
      await publish('after');
      await eventually(() => expect(seen.map((e) => e.type)).toEqual(['before', 'after']));
      await subscription.unsubscribe();
      expect(subscription.cursor).toBe(seen[1]?.cursor);
      await publish('later');
      const resumed: string[] = [];
      const again = subscribeEvents(db, (event) => void resumed.push(event.type), {
        tenantId: 'acme',
        pollMs: 20,
        after: seen[1]?.cursor,
      });
      await eventually(() => expect(resumed).toEqual(['later']));
      await again.unsubscribe();
    });

    it('retries an event whose handler threw, without skipping it', async () => {
      await publish('flaky');
      await publish('next');
      let failures = 0;
      const seen: string[] = [];
      const errors: unknown[] = [];
      const subscription = subscribeEvents(
        db,
        (event) => {
          if (event.type === 'flaky' && failures++ === 0) throw new Error('once');
          seen.push(event.type);
        },
        { tenantId: 'acme', pollMs: 20, onError: (error) => errors.push(error) },
      );
      await eventually(() => expect(seen).toEqual(['flaky', 'next']));
      await subscription.unsubscribe();
      expect(errors).toHaveLength(1);
    });
  });
}
