import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createCommandKindRegistry, createCommandQueue, type KernelCommandQueue } from '../../src/commands';
import { manifest } from '../../src/manifest';
import type { SqlDatabase } from '../../src/sql';
import { createWorkQueue, shardOf, WORK_CHANNEL } from '../../src/work';
import type { ScratchDatabase } from '../support/databases';
import { insertNode, manualClock, prepareKernel, resetKernel } from './command-queue';

const SHARDS = 64;

/**
 * A settling command's wake with the kernel's work queue: queued by the statement that settles it, so an agent's
 * result is one round trip and atomic without a transaction around it.
 */
export function defineCommandWakeConformance(create: () => Promise<ScratchDatabase>): void {
  let scratch: ScratchDatabase;
  let db: SqlDatabase;
  const clock = manualClock();
  const kinds = createCommandKindRegistry([
    { moduleId: 'core', definition: { name: 'node.reboot', payload: manifest({}) } },
  ]);
  const work = createWorkQueue({ clock, shards: SHARDS });
  let queue: KernelCommandQueue;
  let nodeId: string;
  const statements: string[] = [];
  // The database, with the statements sent through it recorded.
  const recorded = (): SqlDatabase => ({
    backend: db.backend,
    query: (text, params) => {
      statements.push(text);
      return db.query(text, params);
    },
    transaction: (fn) => {
      statements.push('BEGIN');
      return db.transaction(fn);
    },
    listen: (channel, handler) => db.listen(channel, handler),
    close: () => db.close(),
  });
  const workItems = async () =>
    (
      await db.query<{ kind: string; key: string; shard: number; urgent: boolean; not_before: Date; seq: number }>(
        'SELECT kind, key, shard, urgent, not_before, seq FROM work_items ORDER BY key',
      )
    ).rows;
  const running = async (key: string, wake?: { kind: string; key: string }) => {
    const notAfter = new Date(clock.now().getTime() + 3_600_000);
    const command = await db.transaction((tx) =>
      queue.enqueue(tx, { nodeId, kind: 'node.reboot', payload: {}, key, notAfter, ...(wake ? { wake } : {}) }),
    );
    await db.transaction((tx) => queue.pollCommands(tx, { nodeId }));
    await queue.ackCommand(db, { nodeId, commandId: command.id });
    await queue.startCommand(db, { nodeId, commandId: command.id });
    return command.id;
  };

  beforeAll(async () => {
    scratch = await create();
    db = scratch.db;
    await prepareKernel(db, clock);
    queue = createCommandQueue({ kinds, clock, work });
  });
  afterAll(async () => {
    await scratch?.drop();
  });
  beforeEach(async () => {
    await resetKernel(db, clock);
    await db.query('TRUNCATE work_items');
    nodeId = await insertNode(db, clock, 'acme');
    statements.length = 0;
  });

  describe('a settling command wakes its waiter in the same statement', () => {
    it('completes in one statement outside any transaction, queueing an urgent wake on its shard and notifying it', async () => {
      const key = 'node_01k9z3wake';
      const id = await running('k1', { kind: 'workflow', key });
      const heard: string[] = [];
      const unlisten = await db.listen(WORK_CHANNEL, (payload) => void heard.push(payload));
      try {
        statements.length = 0;
        const done = await queue.completeCommand(recorded(), { nodeId, commandId: id, result: new Uint8Array([7]) });
        // The notification too: the wake must not wait for this process to run again after the commit.
        expect(statements).toHaveLength(1);
        expect(statements[0]).toMatch(/pg_notify/);
        expect(done).toMatchObject({ id, state: 'succeeded', result: new Uint8Array([7]) });
        expect(await workItems()).toEqual([
          { kind: 'workflow', key, shard: shardOf(key, SHARDS), urgent: true, not_before: clock.now(), seq: 1 },
        ]);
        const until = Date.now() + 5_000;
        while (heard.length === 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
        expect(heard).toEqual([`${shardOf(key, SHARDS)} urgent`]);
      } finally {
        await unlisten();
      }
    });

    it('bumps the seq of a wake already queued and keeps its earliest due time', async () => {
      const key = 'node_seq';
      await db.transaction((tx) =>
        work.enqueue(tx, { kind: 'workflow', key, notBefore: new Date(clock.now().getTime() - 1_000) }),
      );
      const id = await running('k2', { kind: 'workflow', key });
      await queue.failCommand(db, { nodeId, commandId: id, reason: 'disk on fire' });
      expect(await workItems()).toMatchObject([
        { key, urgent: true, seq: 2, not_before: new Date(clock.now().getTime() - 1_000) },
      ]);
    });

    it('wakes nobody for a command without a wake, a move that does not settle, or a repeated completion', async () => {
      const plain = await running('k3');
      await queue.completeCommand(db, { nodeId, commandId: plain });
      const waited = await running('k4', { kind: 'workflow', key: 'node_w' });
      expect(await workItems()).toEqual([]);
      await queue.completeCommand(db, { nodeId, commandId: waited });
      await queue.completeCommand(db, { nodeId, commandId: waited });
      expect(await workItems()).toMatchObject([{ key: 'node_w', seq: 1 }]);
    });

    it('rolls back with the transaction it ran in', async () => {
      const id = await running('k5', { kind: 'workflow', key: 'node_rb' });
      await expect(
        db.transaction(async (tx) => {
          await queue.completeCommand(tx, { nodeId, commandId: id });
          throw new Error('the caller changes its mind');
        }),
      ).rejects.toThrow('the caller changes its mind');
      expect(await workItems()).toEqual([]);
      expect((await queue.get(db, id))?.state).toBe('running');
    });

    it('wakes the waiter of a command it expires', async () => {
      const id = await running('k6', { kind: 'workflow', key: 'node_exp' });
      clock.advance(3_600_001);
      const expired = await db.transaction((tx) => queue.expireDueCommands(tx, clock.now()));
      expect(expired.map((c) => c.id)).toEqual([id]);
      expect(await workItems()).toMatchObject([{ key: 'node_exp', urgent: true, shard: shardOf('node_exp', SHARDS) }]);
    });
  });
}
