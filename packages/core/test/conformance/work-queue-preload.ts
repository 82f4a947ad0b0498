import { describe, expect, it } from 'vitest';
import type { ModuleContext, Reconciler } from '../../src/kernel/module';
import type { SqlDatabase } from '../../src/sql';
import { createWorkQueue, runDueWork, startWorker } from '../../src/work';
import { claimDueItems } from '../../src/work/items';
import { ClaimPreloads } from '../../src/work/preloads';
import { contextFactory, fakeClock, recordingLogger, useWorkDatabase, waitFor } from '../fixtures/work-support';
import type { ScratchDatabase } from '../support/databases';

const SHARDS = 8;

/** What a reconciler saw: whether `preloaded` was there at all, and its value. */
interface Seen {
  key: string;
  has: boolean;
  value: unknown;
}

/** Reconciler preloads (`ReconcilerPreload`): read by the claim's own statement, handed over as `ctx.preloaded`. */
export function defineWorkQueuePreloadConformance(create: () => Promise<ScratchDatabase>): void {
  let db: SqlDatabase;
  const clock = fakeClock();
  const work = createWorkQueue({ clock, shards: SHARDS });
  const makeContext = contextFactory(work, clock);
  let seen: Seen[] = [];

  const record = async (key: string, ctx: ModuleContext) => {
    seen.push({ key, has: 'preloaded' in ctx, value: ctx.preloaded });
  };
  const withPreload = (sql: (key: string) => string): Reconciler =>
    Object.assign((key: string, ctx: ModuleContext) => record(key, ctx), { preload: { sql } });
  const probe = withPreload((key) => `(SELECT json_build_object('v', p.v) FROM preload_probe p WHERE p.key = ${key})`);
  const enqueue = (kind: string, key: string) => db.transaction((tx) => work.enqueue(tx, { kind, key }));
  const setProbe = (key: string, v: number) =>
    db.query('INSERT INTO preload_probe (key, v) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET v = EXCLUDED.v', [
      key,
      v,
    ]);
  /** A worker running `reconciler` for kind `probe` until one item was seen. */
  const runOneWithWorker = async (reconciler: Reconciler, log: ReturnType<typeof recordingLogger>) => {
    const reconcilers = new Map([['probe', reconciler]]);
    const worker = await startWorker({ db, clock, shards: SHARDS, reconcilers, makeContext, log, pollMs: 20 });
    try {
      await waitFor('the item to be handled', () => seen.length > 0);
    } finally {
      await worker.stop();
    }
  };
  const run = (reconcilers: Record<string, Reconciler>, log = recordingLogger()) =>
    runDueWork({ db, clock, reconcilers: new Map(Object.entries(reconcilers)), makeContext, log });

  useWorkDatabase(create, {
    setup: async (created) => {
      db = created;
      await db.query('CREATE TABLE preload_probe (key text PRIMARY KEY, v int NOT NULL)');
    },
    reset: async () => {
      await db.query('TRUNCATE work_items, shard_leases, workers, preload_probe');
      await db.query('DROP TRIGGER IF EXISTS bump_seq_at_claim ON work_items');
      seen = [];
    },
  });

  describe('reconciler preloads', () => {
    it('hands each claimed item what its preload read, null when the expression is NULL', async () => {
      await setProbe('a', 1);
      await setProbe('b', 2);
      for (const key of ['a', 'b', 'c']) await enqueue('probe', key);
      expect(await run({ probe })).toBe(3);
      expect(seen.sort((x, y) => x.key.localeCompare(y.key))).toEqual([
        { key: 'a', has: true, value: { v: 1 } },
        { key: 'b', has: true, value: { v: 2 } },
        { key: 'c', has: true, value: null },
      ]);
    });

    it('gives a reconciler without a preload no preloaded value, beside one with a preload', async () => {
      await setProbe('a', 1);
      await enqueue('probe', 'a');
      await enqueue('plain', 'a');
      await run({ probe, plain: (key, ctx) => record(key, ctx) });
      expect(seen.find((s) => s.value !== null && s.has)).toEqual({ key: 'a', has: true, value: { v: 1 } });
      expect(seen.filter((s) => !s.has)).toHaveLength(1);
    });

    it('converts any scalar to JSON: a number, a string', async () => {
      await setProbe('a', 7);
      await enqueue('n', 'a');
      await enqueue('s', 'a');
      const values: Record<string, unknown> = {};
      const keep = (kind: string, sql: (key: string) => string): Reconciler =>
        Object.assign(
          async (_key: string, ctx: ModuleContext) => {
            values[kind] = ctx.preloaded;
          },
          { preload: { sql } },
        );
      await run({
        n: keep('n', (key) => `(SELECT v FROM preload_probe WHERE key = ${key})`),
        s: keep('s', (key) => `('key:' || ${key})`),
      });
      expect(values).toEqual({ n: 7, s: 'key:a' });
    });

    it("gives the preload the claim's now (the worker's clock, not the server's)", async () => {
      // The fake clock stands years away from the server's now(): a preload that read now() would not see it.
      const at = clock.now().toISOString();
      await enqueue('clocked', 'a');
      const values: unknown[] = [];
      const clocked = Object.assign(
        async (_key: string, ctx: ModuleContext) => {
          values.push(ctx.preloaded);
        },
        { preload: { sql: (key: string, now: string) => `(SELECT json_build_object('key', ${key}, 'now', ${now}))` } },
      );
      expect(await run({ clocked })).toBe(1);
      expect(values).toHaveLength(1);
      const value = values[0] as { key: string; now: string };
      expect(value.key).toBe('a');
      expect(new Date(value.now).toISOString()).toBe(at);
    });

    it('withholds the preload when the item changed between the snapshot and the lock (seq moved)', async () => {
      // A wake that commits while a claim runs is seen by the claim's lock but not by its snapshot. A trigger that
      // bumps seq as the claim updates the row makes the locked version differ from the snapshot's the same way.
      await db.query(`CREATE OR REPLACE FUNCTION bump_seq() RETURNS trigger AS $$
        BEGIN NEW.seq := OLD.seq + 1; RETURN NEW; END $$ LANGUAGE plpgsql`);
      await db.query(
        'CREATE TRIGGER bump_seq_at_claim BEFORE UPDATE OF claimed_by ON work_items FOR EACH ROW EXECUTE FUNCTION bump_seq()',
      );
      await setProbe('a', 1);
      await enqueue('probe', 'a');
      const [item] = await claimDueItems(db, {
        claimant: 't',
        now: clock.now(),
        limit: 1,
        preload: new Map([['probe', probe.preload?.sql as (key: string, now: string) => string]]),
      });
      expect(item).toBeDefined();
      expect(item && 'preloaded' in item).toBe(false);
    });

    it('claims without preloads, and turns them off, when a claim fails with them', async () => {
      const failing = withPreload((key) => `(SELECT 1 / (v - 1) FROM preload_probe WHERE key = ${key})`);
      const reconcilers = new Map([['probe', failing]]);
      const log = recordingLogger();
      const runWith = () => runDueWork({ db, clock, reconcilers, makeContext, log });
      await setProbe('a', 1);
      await enqueue('probe', 'a');
      expect(await runWith()).toBe(1);
      expect(seen).toEqual([{ key: 'a', has: false, value: undefined }]);
      const line = log.lines.find((l) => l.message.includes('are off for this worker'));
      expect(line).toMatchObject({ level: 'error', fields: { kinds: ['probe'] } });
      // Off for good with the same reconcilers: a value that would not fail is not preloaded either.
      await setProbe('b', 5);
      await enqueue('probe', 'b');
      expect(await runWith()).toBe(1);
      expect(seen[1]).toEqual({ key: 'b', has: false, value: undefined });
    });

    it('does not blame the preloads for a lost connection: the claim fails as it is, once', async () => {
      const preloads = new ClaimPreloads(new Map([['probe', probe]]), recordingLogger());
      let calls = 0;
      const lost = Object.assign(new Error('connection reset'), { code: 'ECONNRESET' });
      await expect(
        preloads.claim(async () => {
          calls += 1;
          throw lost;
        }),
      ).rejects.toMatchObject({ message: 'connection reset' });
      expect(calls).toBe(1);
      expect(preloads.kinds).toEqual(['probe']);
    });

    it('a worker drops a preload that fails its check at start, logs it, and runs the kind without it', async () => {
      const broken = withPreload((key) => `(SELECT nope FROM missing_table WHERE key = ${key})`);
      const log = recordingLogger();
      await enqueue('probe', 'a');
      await runOneWithWorker(broken, log);
      expect(seen[0]).toEqual({ key: 'a', has: false, value: undefined });
      const line = log.lines.find((l) => l.message.includes('failed its check'));
      expect(line).toMatchObject({ level: 'error', fields: { kind: 'probe' } });
      expect(JSON.stringify(line)).not.toContain('missing_table');
    });

    it('a worker hands over what the claim preloaded', async () => {
      await setProbe('a', 3);
      await enqueue('probe', 'a');
      await runOneWithWorker(probe, recordingLogger());
      expect(seen[0]).toEqual({ key: 'a', has: true, value: { v: 3 } });
    });
  });
}
