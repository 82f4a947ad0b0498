import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCommandWaiters } from '../../src/agent-api/command-waiters';
import { type Scratch, scratchPostgres, TEST_DATABASE_URL } from '../support/database';

const quiet = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

// The long poll trusts its notifications between re-checks; a LISTEN connection that is lost and comes back has
// missed whatever was notified meanwhile, so every held poll must look again at once.
describe.runIf(TEST_DATABASE_URL)('the long poll waiters on PostgreSQL', () => {
  let scratch: Scratch;

  beforeAll(async () => {
    scratch = await scratchPostgres();
  });
  afterAll(async () => {
    await scratch?.drop();
  });

  it('wakes every held poll when its LISTEN connection comes back after being lost', async () => {
    const database = scratch.connect({ max: 2 });
    const waiters = createCommandWaiters(database, quiet);
    try {
      await waiters.listen();
      const [a, b] = [waiters.register('node_a'), waiters.register('node_b')];
      const held = Promise.all([a.wait(60_000), b.wait(60_000)]);
      const { rows } = await scratch.db.query<{ pid: number }>(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'listen%'",
      );
      expect(rows).toHaveLength(1);
      await scratch.db.query('SELECT pg_terminate_backend($1)', [rows[0]?.pid]);
      expect(await held).toEqual(['woken', 'woken']);
      a.release();
      b.release();
      // Listening again: a notification still wakes its node's poll.
      const c = waiters.register('node_c');
      const woken = c.wait(60_000);
      await scratch.db.query("SELECT pg_notify('bc_commands', 'node_c')");
      expect(await woken).toBe('woken');
      c.release();
    } finally {
      await waiters.close();
    }
  });
});
