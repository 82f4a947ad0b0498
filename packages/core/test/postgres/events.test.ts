import { describe, expect, it } from 'vitest';
import { createEventBus, readEvents } from '../../src/events';
import { manualClock, prepareKernel, resetKernel } from '../conformance/command-queue';
import { defineEventsConformance, olderTransactionsDone } from '../conformance/events';
import { scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

describe.runIf(TEST_DATABASE_URL)('postgres', () => {
  defineEventsConformance(scratchPostgres);

  it('does not skip an event whose transaction began first and commits after a later one', async () => {
    const scratch = await scratchPostgres();
    let release: () => void = () => undefined;
    try {
      const clock = manualClock();
      await prepareKernel(scratch.db, clock);
      await resetKernel(scratch.db, clock);
      const bus = createEventBus({ clock });
      const other = scratch.connect();
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let published!: () => void;
      const firstPublished = new Promise<void>((resolve) => {
        published = resolve;
      });
      // The slow transaction takes its xid and the smaller seq first, then waits.
      const slow = other.transaction(async (tx) => {
        await bus.publish(tx, { tenantId: 'acme', subject: 's', type: 'slow', data: {} });
        published();
        await held;
      });
      await firstPublished;
      await scratch.db.transaction((tx) => bus.publish(tx, { tenantId: 'acme', subject: 's', type: 'fast', data: {} }));
      const between = await readEvents(scratch.db, { tenantId: 'acme' });
      expect(between.events.map((e) => e.type)).toEqual([]);
      release();
      await slow;
      await olderTransactionsDone(scratch.db);
      const after = await readEvents(scratch.db, { tenantId: 'acme', after: between.cursor });
      expect(after.events.map((e) => e.type)).toEqual(['slow', 'fast']);
      const seqs = await scratch.db.query<{ type: string; seq: number }>('SELECT type, seq FROM events ORDER BY seq');
      expect(seqs.rows.map((r) => r.type)).toEqual(['slow', 'fast']);
    } finally {
      release();
      await scratch.drop();
    }
  });
});
