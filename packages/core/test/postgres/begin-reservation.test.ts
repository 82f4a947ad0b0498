import postgres from 'postgres';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createPostgresDatabase } from '../../src/postgres';
import type { SqlDatabase } from '../../src/sql';
import { type ScratchDatabase, scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

/**
 * postgres.js (3.4.9) reserves a transaction's connection in a hook that ran only when the pool could pipeline more
 * onto that connection: a BEGIN that filled a connection's pipeline (or met socket back-pressure) reached the server
 * on a connection the pool still handed to other callers. The caller got UNSAFE_TRANSACTION (an HTTP 500 in the agent
 * API under load), and the server-side transaction stayed open with the pool's next statements running inside it,
 * uncommitted. Our patch of the driver reserves the connection whenever BEGIN was handed to the socket. A small
 * pipeline limit reaches that boundary on every round, as a busy pool of the default limit does now and then.
 */
describe.runIf(TEST_DATABASE_URL)('a transaction begun on a crowded pool (postgres)', () => {
  let scratch: ScratchDatabase;
  let admin: SqlDatabase;

  beforeAll(async () => {
    scratch = await scratchPostgres();
    admin = createPostgresDatabase({ url: scratch.url, max: 2 });
    await admin.query('CREATE TABLE crowded_rows (source text NOT NULL, n int NOT NULL)');
  });
  // Each test starts from an empty table: the first counts every row that committed, whichever test wrote it.
  beforeEach(async () => {
    await admin.query('TRUNCATE crowded_rows');
  });
  afterAll(async () => {
    await admin?.close();
    await scratch?.drop();
  });

  it('reserves its connection, so no BEGIN is refused and every statement outside it commits', async () => {
    const failures: string[] = [];
    // max_pipeline is a driver option its type declarations leave out.
    const crowded = { max: 3, max_pipeline: 2, onnotice: () => undefined };
    const sql = postgres(scratch.url as string, crowded);
    try {
      await Promise.all(Array.from({ length: 3 }, () => sql`SELECT 1`)); // all three connections open
      for (let round = 0; round < 10; round++) {
        // Each connection busy with one statement and one more queued behind it: a BEGIN sent next fills a pipeline.
        const busy = Array.from({ length: 3 }, () => sql`SELECT pg_sleep(0.05)`.execute());
        const plain = Array.from({ length: 3 }, (_, n) =>
          sql`INSERT INTO crowded_rows (source, n) VALUES ('plain', ${round * 10 + n})`.execute(),
        );
        const transactions = Array.from({ length: 5 }, (_, n) =>
          sql.begin(async (tx) => {
            await tx`INSERT INTO crowded_rows (source, n) VALUES ('tx', ${round * 10 + n})`;
          }),
        );
        const later = Array.from({ length: 3 }, (_, n) =>
          sql`INSERT INTO crowded_rows (source, n) VALUES ('plain', ${round * 10 + 5 + n})`.execute(),
        );
        const settled = await Promise.allSettled([...busy, ...plain, ...transactions, ...later]);
        for (const outcome of settled) {
          if (outcome.status === 'rejected')
            failures.push(String((outcome.reason as Error)?.message ?? outcome.reason));
        }
      }
    } finally {
      await sql.end({ timeout: 5 });
    }
    expect(failures).toEqual([]);
    // Read from another pool: only what committed is there, so a statement left inside a stray transaction is missing.
    const counts = await admin.query<{ source: string; count: number }>(
      'SELECT source, count(*)::int AS count FROM crowded_rows GROUP BY source ORDER BY source',
    );
    expect(counts.rows).toEqual([
      { source: 'plain', count: 60 },
      { source: 'tx', count: 50 },
    ]);
    const stray = await admin.query<{ count: number }>(
      "SELECT count(*)::int AS count FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
    );
    expect(stray.rows[0]?.count).toBe(0);
  });

  it('keeps a transaction that is idle between its statements out of the pool while other callers wait', async () => {
    const sql = postgres(scratch.url as string, { max: 1, onnotice: () => undefined });
    try {
      let outsideRan = false;
      let outside: Promise<void> | undefined;
      await sql.begin(async (tx) => {
        await tx`INSERT INTO crowded_rows (source, n) VALUES ('held', 1)`;
        // The only connection is this transaction's: a statement from outside must wait for it to end.
        outside = sql`SELECT 1`.then(() => {
          outsideRan = true;
        });
        await new Promise((resolve) => setTimeout(resolve, 100));
        expect(outsideRan).toBe(false);
      });
      await outside;
      expect(outsideRan).toBe(true);
    } finally {
      await sql.end({ timeout: 5 });
    }
  });
});
