import { describe, expect, it } from 'vitest';
import { createCommandKindRegistry, createCommandQueue } from '../../src/commands';
import { manifest } from '../../src/manifest';
import {
  defineCommandQueueConformance,
  insertNode,
  manualClock,
  prepareKernel,
  recordingWork,
  resetKernel,
} from '../conformance/command-queue';
import { defineCommandWakeConformance } from '../conformance/command-wake';
import { scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

describe.runIf(TEST_DATABASE_URL)('postgres', () => {
  defineCommandQueueConformance(scratchPostgres);
  defineCommandWakeConformance(scratchPostgres);

  it('returns one command to two transactions enqueueing the same key at once', async () => {
    const scratch = await scratchPostgres();
    let release: () => void = () => undefined;
    try {
      const clock = manualClock();
      await prepareKernel(scratch.db, clock);
      await resetKernel(scratch.db, clock);
      const nodeId = await insertNode(scratch.db, clock, 'acme');
      const kinds = createCommandKindRegistry([
        { moduleId: 'core', definition: { name: 'node.reboot', payload: manifest({}) } },
      ]);
      const queue = createCommandQueue({ kinds, clock, work: recordingWork });
      const notAfter = new Date(clock.now().getTime() + 60_000);
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let inserted!: () => void;
      const firstInserted = new Promise<void>((resolve) => {
        inserted = resolve;
      });
      const first = scratch.connect().transaction(async (tx) => {
        const command = await queue.enqueue(tx, { nodeId, kind: 'node.reboot', payload: {}, key: 'same', notAfter });
        inserted();
        await held;
        return command;
      });
      await firstInserted;
      // The second insert waits on the first's uncommitted row, then finds it once the first commits.
      const second = scratch.db.transaction((tx) =>
        queue.enqueue(tx, { nodeId, kind: 'node.reboot', payload: {}, key: 'same', notAfter }),
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
      release();
      const [a, b] = await Promise.all([first, second]);
      expect(b.id).toBe(a.id);
      const { rows } = await scratch.db.query('SELECT id FROM commands');
      expect(rows).toHaveLength(1);
    } finally {
      release();
      await scratch.drop();
    }
  });
});
