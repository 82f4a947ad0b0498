import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMMANDS_CHANNEL } from '../src/commands';
import { commit } from '../src/commit';
import { betterCompute, type Compute } from '../src/kernel';
import { manifest } from '../src/manifest';
import { createNode } from '../src/nodes';
import { BACKENDS, type ScratchDatabase } from './support/databases';

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

for (const backend of BACKENDS) {
  describe.runIf(backend.enabled)(`a new command's NOTIFY (${backend.name})`, () => {
    let scratch: ScratchDatabase;
    let compute: Compute;
    let nodeId: string;
    const heard: string[] = [];
    let stop: () => Promise<void>;
    let sequence = 0;

    beforeAll(async () => {
      scratch = await backend.create();
      compute = await betterCompute({
        database: scratch.db,
        modules: [{ id: 'notifytest', commandKinds: [{ name: 'test.run', payload: manifest({}) }] }],
      });
      nodeId = (await createNode(scratch.db, { tenantId: 'root', kind: 'machine' }, new Date())).id;
      stop = await scratch.db.listen(COMMANDS_CHANNEL, (payload) => heard.push(payload));
    });
    afterAll(async () => {
      await stop?.();
      await compute?.close();
      await scratch?.drop();
    });

    const command = () => ({
      nodeId,
      kind: 'test.run',
      payload: {},
      key: `wf:wf_${++sequence}:step#1`,
      notAfter: new Date(Date.now() + 60_000),
    });

    const heardWithin = async (ms: number) => {
      const end = Date.now() + ms;
      while (heard.length === 0 && Date.now() < end) await wait(10);
      return heard.splice(0);
    };

    it('names the node on bc_commands when enqueue inserts a command, and only at commit', async () => {
      await scratch.db.transaction(async (tx) => {
        await compute.commands.enqueue(tx, command());
        await wait(100);
        expect(heard).toEqual([]);
      });
      expect(await heardWithin(3_000)).toEqual([nodeId]);
    });

    it('says nothing for a rolled-back enqueue or one that finds the key taken', async () => {
      const first = command();
      await scratch.db
        .transaction(async (tx) => {
          await compute.commands.enqueue(tx, first);
          throw new Error('roll back');
        })
        .catch(() => undefined);
      await scratch.db.transaction((tx) => compute.commands.enqueue(tx, first));
      expect(await heardWithin(3_000)).toEqual([nodeId]);
      await scratch.db.transaction((tx) => compute.commands.enqueue(tx, first));
      expect(await heardWithin(300)).toEqual([]);
    });

    it("names the node when commit's statement inserts the staged command", async () => {
      const result = await commit(compute.context, {
        changes: [{ name: 'one', sql: ({ bind, guard }) => `SELECT ${bind(1)}::int AS one WHERE ${guard}` }],
        command: command(),
      });
      expect(result.status).toBe('committed');
      expect(await heardWithin(3_000)).toEqual([nodeId]);
    });
  });
}
