import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openAgentSession, recordAgentSessionWakes } from '../../src/agents';
import type { SqlDatabase } from '../../src/sql';
import { shardOf, WORK_CHANNEL } from '../../src/work';
import type { ScratchDatabase } from '../support/databases';
import { insertNode, manualClock, prepareKernel, resetKernel } from './command-queue';

const SHARDS = 64;

/**
 * Opening a session wakes the work kinds the modules declared (`wakeOnAgentSession`), keyed by the node, in the
 * session's own statement: what a workflow waiting for the agent needs to run at once instead of at its next poll.
 */
export function defineAgentSessionWakesConformance(create: () => Promise<ScratchDatabase>): void {
  let scratch: ScratchDatabase;
  let db: SqlDatabase;
  const clock = manualClock();
  let nodeId: string;
  const open = (node = nodeId, bootId = 'boot-1') =>
    db.transaction((tx) => openAgentSession(tx, { nodeId: node, role: 'ramdisk', bootId, clock }));
  const workItems = async () =>
    (
      await db.query<{ kind: string; key: string; shard: number; urgent: boolean; not_before: Date }>(
        'SELECT kind, key, shard, urgent, not_before FROM work_items ORDER BY kind, key',
      )
    ).rows;
  const recorded = async () =>
    (await db.query<{ kind: string; shards: number }>('SELECT kind, shards FROM agent_session_wakes ORDER BY kind'))
      .rows;

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
    await db.query('TRUNCATE work_items, agent_session_wakes');
    nodeId = await insertNode(db, clock, 'acme');
  });

  describe('opening a session wakes the declared kinds', () => {
    it('queues nothing when no kind is declared', async () => {
      await open();
      expect(await workItems()).toEqual([]);
    });

    it('queues every declared kind keyed by the node, due now and urgent, on the shard the kernel computes', async () => {
      await recordAgentSessionWakes(db, ['acme.wait', 'acme.other'], SHARDS);
      const other = await insertNode(db, clock, 'acme');
      await open();
      const due = { key: nodeId, shard: shardOf(nodeId, SHARDS), urgent: true, not_before: clock.now() };
      expect(await workItems()).toEqual([
        { kind: 'acme.other', ...due },
        { kind: 'acme.wait', ...due },
      ]);
      expect((await workItems()).some((item) => item.key === other)).toBe(false);
    });

    it('makes an item queued for later due now, keeping one item per kind and key', async () => {
      await recordAgentSessionWakes(db, ['acme.wait'], SHARDS);
      const later = new Date(clock.now().getTime() + 10_000);
      await db.query(
        `INSERT INTO work_items (kind, key, shard, not_before, urgent, created_at, seq, attempts, updated_at)
         VALUES ('acme.wait', $1, $2, $3, false, $4, 1, 0, $4)`,
        [nodeId, shardOf(nodeId, SHARDS), later, clock.now()],
      );
      await open();
      expect(await workItems()).toEqual([
        { kind: 'acme.wait', key: nodeId, shard: shardOf(nodeId, SHARDS), urgent: true, not_before: clock.now() },
      ]);
    });

    it("queues the wake in the session's transaction, and rolls it back with the session", async () => {
      await recordAgentSessionWakes(db, ['acme.wait'], SHARDS);
      await expect(
        db.transaction(async (tx) => {
          await openAgentSession(tx, { nodeId, role: 'node', bootId: 'boot-1', clock });
          const inside = await tx.query<{ kind: string }>('SELECT kind FROM work_items WHERE key = $1', [nodeId]);
          expect(inside.rows).toEqual([{ kind: 'acme.wait' }]);
          throw new Error('the caller gives up');
        }),
      ).rejects.toThrow('the caller gives up');
      expect((await db.query('SELECT id FROM agent_sessions')).rows).toEqual([]);
      expect(await workItems()).toEqual([]);
    });

    it("notifies the shard's worker at commit, saying it is urgent", async () => {
      await recordAgentSessionWakes(db, ['acme.wait'], SHARDS);
      const heard: string[] = [];
      const unlisten = await db.listen(WORK_CHANNEL, (payload) => void heard.push(payload));
      try {
        await open();
        const until = Date.now() + 5_000;
        while (heard.length === 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
        expect(heard).toEqual([`${shardOf(nodeId, SHARDS)} urgent`]);
      } finally {
        await unlisten();
      }
    });
  });

  describe('recordAgentSessionWakes', () => {
    it('makes the recorded kinds exactly the ones given, with the shard count', async () => {
      await recordAgentSessionWakes(db, ['acme.a', 'acme.b', 'acme.b'], 16);
      expect(await recorded()).toEqual([
        { kind: 'acme.a', shards: 16 },
        { kind: 'acme.b', shards: 16 },
      ]);
      await recordAgentSessionWakes(db, ['acme.b', 'acme.c'], SHARDS);
      expect(await recorded()).toEqual([
        { kind: 'acme.b', shards: SHARDS },
        { kind: 'acme.c', shards: SHARDS },
      ]);
      await recordAgentSessionWakes(db, [], SHARDS);
      expect(await recorded()).toEqual([]);
    });

    it('refuses a kind that is not a work kind and a shard count out of range', async () => {
      await expect(recordAgentSessionWakes(db, [''], SHARDS)).rejects.toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['kinds', 0] },
      });
      await expect(recordAgentSessionWakes(db, ['acme.a'], 0)).rejects.toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['shards'] },
      });
    });
  });
}
