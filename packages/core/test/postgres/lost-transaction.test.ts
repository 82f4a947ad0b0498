import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresDatabase } from '../../src/postgres';
import { isSqlError, type SqlDatabase, type SqlExecutor } from '../../src/sql';
import { type ScratchDatabase, scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A transaction whose connection is lost (its backend terminated) while a caller's callback still runs: postgres.js
 * hands the connection back to its pool, which reconnects it for the next caller at once. Whatever the dead
 * transaction's callback (or the driver's own ROLLBACK TO for a savepoint) sends after that must fail, never run on
 * the connection's next session, where it would commit outside its transaction or leave that session waiting for the
 * answer to a statement it never sent.
 */
describe.runIf(TEST_DATABASE_URL)('a transaction whose connection was lost (postgres)', () => {
  let scratch: ScratchDatabase;
  let admin: SqlDatabase;
  const handles: SqlDatabase[] = [];
  const open = () => {
    // One connection, so the pool's next caller reconnects the very connection the transaction had.
    const db = createPostgresDatabase({ url: scratch.url, max: 1, queryTimeoutMs: 3_000, statementTimeoutMs: 0 });
    handles.push(db);
    return db;
  };

  beforeAll(async () => {
    scratch = await scratchPostgres();
    admin = createPostgresDatabase({ url: scratch.url, max: 2 });
    await admin.query('CREATE TABLE lost_tx_rows (n int NOT NULL)');
  });
  afterAll(async () => {
    await Promise.all(handles.map((h) => h.close().catch(() => undefined)));
    await admin?.close();
    await scratch?.drop();
  });

  /** Runs `body` in a transaction, terminates its backend once `body` reported it, with a caller queued behind it. */
  async function loseMidTransaction(db: SqlDatabase, body: (tx: SqlExecutor, ready: () => void) => Promise<void>) {
    let announce!: () => void;
    const ready = new Promise<void>((resolve) => {
      announce = resolve;
    });
    let pid = 0;
    const transaction = db
      .transaction(async (tx) => {
        pid = (await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid ?? 0;
        await body(tx, announce);
      })
      .then(
        () => 'committed',
        (error: unknown) => error,
      );
    await ready;
    const queued = db.query<{ n: number }>('SELECT 7 AS n');
    await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    return { transaction, queued };
  }

  it('refuses what its callback sends after the loss, so nothing runs outside the transaction on the next session', async () => {
    const db = open();
    const { transaction, queued } = await loseMidTransaction(db, async (tx, ready) => {
      ready();
      await tx.query('SELECT pg_sleep(30)').catch(() => undefined);
      // The callback goes on, as one that catches an error does; the pool has reconnected for the queued caller.
      await sleep(300);
      await tx.query('INSERT INTO lost_tx_rows (n) VALUES (1)');
    });
    const outcome = await transaction;
    expect(isSqlError(outcome, 'connection-lost')).toBe(true);
    expect((await queued).rows).toEqual([{ n: 7 }]);
    const { rows } = await admin.query<{ n: number }>('SELECT count(*)::int AS n FROM lost_tx_rows');
    expect(rows).toEqual([{ n: 0 }]);
  });

  it("sends no savepoint's rollback to the next session: the pool answers every caller after the loss", async () => {
    const db = open();
    for (let round = 0; round < 5; round += 1) {
      const { transaction, queued } = await loseMidTransaction(db, async (tx, ready) => {
        await tx.transaction(async (inner) => {
          ready();
          await inner.query('SELECT pg_sleep(30)');
        });
      });
      expect(isSqlError(await transaction, 'connection-lost')).toBe(true);
      expect((await queued).rows).toEqual([{ n: 7 }]);
      // Callers after it too: a session left waiting for a statement it never sent would answer nobody.
      for (let i = 0; i < 3; i += 1) {
        expect((await db.query<{ n: number }>('SELECT $1::int AS n', [i])).rows).toEqual([{ n: i }]);
      }
    }
  });
});
