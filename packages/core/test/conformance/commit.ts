import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type CommandPolicy, createCommandKindRegistry, createCommandQueue, type NewCommand } from '../../src/commands';
import { type CommitChange, commit } from '../../src/commit';
import { ComputeError } from '../../src/errors';
import { createEventBus } from '../../src/events';
import { manifest } from '../../src/manifest';
import type { SqlExecutor } from '../../src/sql';
import {
  createWorkQueue,
  FencedExecutor,
  isFencedError,
  parseWorkNotification,
  type ShardLease,
  shardOf,
  WORK_CHANNEL,
} from '../../src/work';
import type { ScratchDatabase } from '../support/databases';
import { insertNode, manualClock, prepareKernel, recordingWork, resetKernel } from './command-queue';

/** The commit service's contract, run once per backend: one statement from typed parts, gated on the first. */
export function defineCommitConformance(create: () => Promise<ScratchDatabase>): void {
  let scratch: ScratchDatabase;
  let db: SqlExecutor;
  const clock = manualClock();
  const kinds = createCommandKindRegistry([
    { moduleId: 'test', definition: { name: 'test.ping', payload: manifest({}) } },
    { moduleId: 'test', definition: { name: 'test.wipe', payload: manifest({}), destructive: true } },
  ]);
  const refuseWipes: CommandPolicy = Object.assign(
    async () => {
      throw new ComputeError('PERMISSION_DENIED', 'wipes need an operator');
    },
    { appliesTo: (kind: { destructive?: boolean }) => kind.destructive === true },
  );
  const events = createEventBus({ clock });
  const commands = createCommandQueue({ kinds, clock, work: recordingWork, policies: [refuseWipes] });
  let nodeId: string;
  const ctx = (sql: SqlExecutor = db, lease?: ShardLease) => ({
    sql,
    clock,
    commands,
    events,
    ...(lease ? { lease } : {}),
  });
  // The module's own table: a row with a revision, and the command it sent.
  const bump = (revision: number): CommitChange => ({
    name: 'thing',
    sql: ({ bind, guard, commandId }) =>
      `UPDATE test_things SET revision = revision + 1, command_id = ${bind(commandId ?? null)}
       WHERE id = 't1' AND revision = ${bind(revision)} AND ${guard} RETURNING revision`,
  });
  const note = (text: string): CommitChange => ({
    name: 'note',
    sql: ({ bind, guard }) => `INSERT INTO test_notes (text) SELECT ${bind(text)}::text WHERE ${guard}`,
  });
  const command = (kind = 'test.ping', key = 'k1'): NewCommand => ({
    nodeId,
    kind,
    payload: {},
    key,
    notAfter: new Date(clock.now().getTime() + 3_600_000),
  });
  const state = async () => ({
    thing: (await db.query('SELECT revision, command_id FROM test_things')).rows,
    notes: (await db.query<{ text: string }>('SELECT text FROM test_notes')).rows.map((r) => r.text),
    events: (await db.query<{ type: string }>('SELECT type FROM events ORDER BY seq')).rows.map((r) => r.type),
    commands: (await db.query<{ id: string; key: string }>('SELECT id, key FROM commands')).rows,
  });

  beforeAll(async () => {
    scratch = await create();
    db = scratch.db;
    await prepareKernel(db, clock);
    await db.query('CREATE TABLE test_things (id text PRIMARY KEY, revision int NOT NULL, command_id text)');
    await db.query('CREATE TABLE test_notes (text text NOT NULL)');
  });
  afterAll(async () => {
    await scratch?.drop();
  });
  beforeEach(async () => {
    await resetKernel(db, clock);
    await db.query('TRUNCATE test_things, test_notes');
    await db.query(`INSERT INTO test_things (id, revision) VALUES ('t1', 1)`);
    nodeId = await insertNode(db, clock, 'acme');
  });

  describe('commit', () => {
    it('writes the changes, the events in order and the command in one statement, the command id in the change', async () => {
      const result = await commit<{ revision: number }>(ctx(), {
        changes: [bump(1), note('hello')],
        events: [
          { tenantId: 'acme', subject: 'thing/t1', type: 'thing.first', data: {} },
          { tenantId: 'acme', subject: 'thing/t1', type: 'thing.second', data: {} },
        ],
        command: command(),
      });
      expect(result.status).toBe('committed');
      if (result.status !== 'committed') return;
      expect(Number(result.row.revision)).toBe(2);
      expect(result.requeued).toBe(false);
      const after = await state();
      expect(after.thing).toEqual([{ revision: 2, command_id: result.commandId }]);
      expect(after.notes).toEqual(['hello']);
      expect(after.events).toEqual(['thing.first', 'thing.second']);
      expect(after.commands).toEqual([{ id: result.commandId, key: 'k1' }]);
    });

    it('writes a sequence of commands in the one statement, in order, or none of them when stale', async () => {
      const sequence = [
        command('test.ping', 'boot-device'),
        { ...command('test.ping', 'power-cycle'), afterKey: 'boot-device' },
      ];
      const stale = await commit(ctx(), { changes: [bump(7)], commands: sequence });
      expect(stale.status).toBe('stale');
      expect((await state()).commands).toEqual([]);
      const result = await commit(ctx(), { changes: [bump(1)], commands: sequence });
      expect(result.status).toBe('committed');
      if (result.status !== 'committed') return;
      expect(result.commandIds).toHaveLength(2);
      const { rows } = await db.query<{ id: string; key: string; after_key: string | null }>(
        'SELECT id, key, after_key FROM commands ORDER BY key',
      );
      expect(rows).toEqual([
        { id: result.commandIds?.[0], key: 'boot-device', after_key: null },
        { id: result.commandIds?.[1], key: 'power-cycle', after_key: 'boot-device' },
      ]);
      expect(result.commandId).toBe(result.commandIds?.[0]);
    });

    it('in a transaction, enqueues a sequence whole or, when one is refused, none of it', async () => {
      const refused = await db.transaction((tx) =>
        commit(
          ctx(tx),
          {
            changes: [bump(1)],
            commands: [command('test.ping', 'boot-device'), command('test.unknown', 'power-cycle')],
          },
          tx,
        ),
      );
      expect(refused).toMatchObject({ status: 'refused', error: { code: 'INVALID_CONFIG' } });
      expect((await state()).commands).toEqual([]);
      const written = await db.transaction((tx) =>
        commit(
          ctx(tx),
          {
            changes: [bump(1)],
            commands: [
              command('test.ping', 'boot-device'),
              { ...command('test.ping', 'power-cycle'), afterKey: 'boot-device' },
            ],
          },
          tx,
        ),
      );
      expect(written.status).toBe('committed');
      expect((await state()).commands.map((c) => c.key).sort()).toEqual(['boot-device', 'power-cycle']);
    });

    it('writes nothing when the first change writes nothing (stale)', async () => {
      const result = await commit(ctx(), {
        changes: [bump(7), note('hello')],
        events: [{ tenantId: 'acme', subject: 'thing/t1', type: 'thing.first', data: {} }],
        command: command(),
      });
      expect(result).toEqual({ status: 'stale' });
      expect(await state()).toEqual({
        thing: [{ revision: 1, command_id: null }],
        notes: [],
        events: [],
        commands: [],
      });
    });

    it('is fenced by the worker lease of ctx.lease: a lease not held is INVALID_STATE fenced, nothing written', async () => {
      const lease = { workerId: 'w-gone', shard: 3, epoch: 9 };
      const fenced = new FencedExecutor(db, lease);
      const error = await commit(ctx(fenced, lease), { changes: [bump(1)] }).catch((e: unknown) => e);
      expect(isFencedError(error)).toBe(true);
      expect((await state()).thing).toEqual([{ revision: 1, command_id: null }]);
    });

    it('reports a command with policies as needing a transaction, and enqueues it with them in one', async () => {
      const staged = await commit(ctx(), { changes: [bump(1)], command: command('test.wipe') });
      expect(staged).toEqual({ status: 'needs-transaction', reason: 'command-policies' });
      const refused = await db.transaction((tx) =>
        commit(ctx(), { changes: [bump(1)], command: command('test.wipe') }, tx),
      );
      expect(refused.status).toBe('refused');
      if (refused.status === 'refused') expect(refused.error.code).toBe('PERMISSION_DENIED');
      expect(await state()).toEqual({
        thing: [{ revision: 1, command_id: null }],
        notes: [],
        events: [],
        commands: [],
      });
    });

    it('reports a command already under its key as needing a transaction; in one, enqueue finds it', async () => {
      const first = await commit(ctx(), { changes: [bump(1)], command: command() });
      expect(first.status).toBe('committed');
      const again = await commit(ctx(), { changes: [bump(2)], command: command() });
      expect(again).toEqual({ status: 'needs-transaction', reason: 'command-key-taken' });
      const inTx = await db.transaction((tx) => commit(ctx(), { changes: [bump(2)], command: command() }, tx));
      expect(inTx.status).toBe('committed');
      if (first.status === 'committed' && inTx.status === 'committed') expect(inTx.commandId).toBe(first.commandId);
      expect((await state()).commands).toHaveLength(1);
    });

    it('reports a command the queue refuses, and writes nothing', async () => {
      const result = await commit(ctx(), { changes: [bump(1)], command: command('test.unknown') });
      expect(result.status).toBe('refused');
      if (result.status === 'refused') expect(result.error.code).toBe('INVALID_CONFIG');
      expect((await state()).thing).toEqual([{ revision: 1, command_id: null }]);
    });

    it('without staging (a queue and bus that only enqueue and publish) needs a transaction, and writes all in one', async () => {
      const { enqueue, get, findByKey, cancel } = commands;
      const plain = { ...ctx(), commands: { enqueue, get, findByKey, cancel }, events: { publish: events.publish } };
      const event = { tenantId: 'acme', subject: 'thing/t1', type: 'thing.first', data: {} };
      expect(await commit(plain, { changes: [bump(1)], command: command() })).toEqual({
        status: 'needs-transaction',
        reason: 'unstaged',
      });
      expect(await commit(plain, { changes: [bump(1)], events: [event] })).toEqual({
        status: 'needs-transaction',
        reason: 'unstaged',
      });
      expect((await state()).thing).toEqual([{ revision: 1, command_id: null }]);
      const stale = await db.transaction((tx) => commit(plain, { changes: [bump(7)], events: [event] }, tx));
      expect(stale).toEqual({ status: 'stale' });
      const result = await db.transaction((tx) =>
        commit(
          plain,
          { changes: [bump(1)], events: [event, { ...event, type: 'thing.second' }], command: command() },
          tx,
        ),
      );
      expect(result.status).toBe('committed');
      if (result.status !== 'committed') return;
      expect(await state()).toEqual({
        thing: [{ revision: 2, command_id: result.commandId }],
        notes: [],
        events: ['thing.first', 'thing.second'],
        commands: [{ id: result.commandId, key: 'k1' }],
      });
    });

    it('queues a wake with the changes in the same statement (notified), and none when stale', async () => {
      const work = createWorkQueue({ clock, shards: 8 });
      const items = async () =>
        (await db.query<{ kind: string; key: string }>('SELECT kind, key FROM work_items ORDER BY key')).rows;
      await db.query('DELETE FROM work_items');
      const withWork = { ...ctx(), work };
      expect(await commit(withWork, { changes: [bump(7)], wake: { kind: 'owner', key: 'n_stale' } })).toEqual({
        status: 'stale',
      });
      expect(await items()).toEqual([]);
      const payloads: string[] = [];
      const stop = await scratch.db.listen(WORK_CHANNEL, (payload) => void payloads.push(payload));
      try {
        const result = await commit(withWork, { changes: [bump(1)], wake: { kind: 'owner', key: 'n_1' } });
        expect(result.status).toBe('committed');
        for (let i = 0; i < 100 && payloads.length === 0; i += 1) await new Promise((r) => setTimeout(r, 10));
      } finally {
        await stop();
      }
      expect(await items()).toEqual([{ kind: 'owner', key: 'n_1' }]);
      expect(payloads.map(parseWorkNotification)).toEqual([{ shard: shardOf('n_1', 8), urgent: false }]);
      await db.query('DELETE FROM work_items');
    });

    it("holds the gate on every change's requires: one that fails writes nothing of the commit", async () => {
      const event = { tenantId: 'acme', subject: 'thing/t1', type: 'thing.first', data: {} };
      const needs = (ok: boolean): CommitChange => ({
        ...note('needs'),
        requires: ({ bind }) => `${bind(ok)}::boolean`,
      });
      expect(await commit(ctx(), { changes: [bump(1), needs(false)], events: [event] })).toEqual({ status: 'stale' });
      expect(await state()).toEqual({
        thing: [{ revision: 1, command_id: null }],
        notes: [],
        events: [],
        commands: [],
      });
      expect((await commit(ctx(), { changes: [bump(1), needs(true)], events: [event] })).status).toBe('committed');
      expect((await state()).notes).toEqual(['needs']);
    });

    it("deletes the pass's own item with `done` while it is as claimed, and leaves one enqueued again since", async () => {
      const work = createWorkQueue({ clock, shards: 8 });
      await db.query('DELETE FROM work_items');
      const seqOf = async (key: string) =>
        Number(
          (await db.query<{ seq: string }>("SELECT seq FROM work_items WHERE kind = 'mine' AND key = $1", [key]))
            .rows[0]?.seq,
        );
      const passOn = async (key: string) => ({ ...ctx(), work, item: { kind: 'mine', key, seq: await seqOf(key) } });
      await work.enqueue(db, { kind: 'mine', key: 'n_done' });
      const done = await commit(await passOn('n_done'), { changes: [bump(1)], done: true });
      expect(done).toMatchObject({ status: 'committed', doneWritten: true });
      expect(await seqOf('n_done')).toBeNaN();
      // Enqueued again while the pass ran: the item stays, and the worker records it as usual.
      await work.enqueue(db, { kind: 'mine', key: 'n_again' });
      const pass = await passOn('n_again');
      await work.enqueue(db, { kind: 'mine', key: 'n_again' });
      const kept = await commit(pass, { changes: [bump(2)], done: true });
      expect(kept.status).toBe('committed');
      expect(kept).not.toHaveProperty('doneWritten');
      expect(await seqOf('n_again')).toBeGreaterThan(pass.item.seq);
      // A stale commit deletes nothing.
      await work.enqueue(db, { kind: 'mine', key: 'n_stale' });
      expect(await commit(await passOn('n_stale'), { changes: [bump(9)], done: true })).toEqual({ status: 'stale' });
      expect(await seqOf('n_stale')).toBeGreaterThan(0);
      await db.query('DELETE FROM work_items');
    });

    it('with a work queue it cannot write in its statement, a wake needs a transaction and is enqueued there', async () => {
      const plain = { ...ctx(), work: recordingWork };
      expect(await commit(plain, { changes: [bump(1)], wake: { kind: 'owner', key: 'n_1' } })).toEqual({
        status: 'needs-transaction',
        reason: 'unstaged',
      });
      const result = await db.transaction((tx) =>
        commit(plain, { changes: [bump(1)], wake: { kind: 'owner', key: 'n_1' } }, tx),
      );
      expect(result.status).toBe('committed');
      const { rows } = await db.query<{ kind: string; key: string }>('SELECT kind, key FROM test_wakes');
      expect(rows).toEqual([{ kind: 'owner', key: 'n_1' }]);
    });

    it('numbers a change name taken twice, writing both, by the same text for the same shape', async () => {
      const texts: string[] = [];
      const seen: SqlExecutor = {
        query: (text, params) => {
          texts.push(text);
          return db.query(text, params);
        },
        transaction: (fn) => db.transaction(fn),
      };
      for (const [revision, words] of [
        [1, ['one', 'two']],
        [2, ['three', 'four']],
      ] as const) {
        const result = await commit(ctx(seen), { changes: [bump(revision), note(words[0]), note(words[1])] });
        expect(result.status).toBe('committed');
      }
      expect((await state()).notes.sort()).toEqual(['four', 'one', 'three', 'two']);
      expect(texts[0]).toMatch(/note_2 AS \(/);
      expect(texts[1]).toBe(texts[0]);
    });

    it('refuses a change named like one of its own parts', async () => {
      const error = await commit(ctx(), { changes: [{ ...bump(1), name: 'fence' }] }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ComputeError);
    });
  });
}
