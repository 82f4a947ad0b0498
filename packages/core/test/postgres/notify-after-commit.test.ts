import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresDatabase } from '../../src/postgres';
import { type SqlDatabase, sendNotifications } from '../../src/sql';
import { type ScratchDatabase, scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// The notifications a PostgreSQL handle sends after a commit go in a transaction of their own that does not wait for
// its WAL flush. What must hold: they still arrive, and the relaxed commit is that transaction's alone, never the next
// writer's on the same connection (a writer's commit must stay durable).
describe.runIf(TEST_DATABASE_URL)('notifications after a commit (postgres)', () => {
  let scratch: ScratchDatabase;
  let one: SqlDatabase;
  const heard: string[] = [];
  let stop: () => Promise<void>;

  beforeAll(async () => {
    scratch = await scratchPostgres();
    // One connection: the notification statement and the writes after it share a session.
    one = createPostgresDatabase({ url: scratch.url as string, max: 1 });
    await one.query('CREATE TABLE t (id int PRIMARY KEY)');
    stop = await scratch.db.listen('bc_test_after', (payload) => heard.push(payload));
  });
  afterAll(async () => {
    await stop?.();
    await one?.close();
    await scratch?.drop();
  });

  const heardWithin = async (count: number, ms: number) => {
    const end = Date.now() + ms;
    while (heard.length < count && Date.now() < end) await wait(10);
    return heard.splice(0);
  };

  it('delivers them and leaves the next transaction on the connection committing durably', async () => {
    await one.transaction(async (tx) => {
      await tx.query('INSERT INTO t (id) VALUES (1)');
      await sendNotifications(tx, [{ channel: 'bc_test_after', payload: 'from a transaction' }]);
    });
    await sendNotifications(one, [{ channel: 'bc_test_after', payload: 'on its own' }]);
    expect((await heardWithin(2, 3_000)).sort()).toEqual(['from a transaction', 'on its own']);
    // The notification statements went first on the one connection; what follows them sees the server's setting.
    const outside = await one.query<{ synchronous_commit: string }>('SHOW synchronous_commit');
    const inside = await one.transaction(async (tx) => {
      await tx.query('INSERT INTO t (id) VALUES (2)');
      return tx.query<{ synchronous_commit: string }>('SHOW synchronous_commit');
    });
    expect(outside.rows[0]?.synchronous_commit).toBe('on');
    expect(inside.rows[0]?.synchronous_commit).toBe('on');
  });
});
