import type { Sql } from 'postgres';
import { describe, expect, it } from 'vitest';
import { ComputeError } from '../src/errors';
import { PostgresSession } from '../src/postgres/session';
import { isSqlError } from '../src/sql';

// A client whose begin() fails the way the driver's own bookkeeping does (postgres.js's generic errors carry a code),
// or runs the callback on a transaction handle nobody queries.
function clientWhoseBegin(behaviour: 'fails' | 'runs'): Sql {
  const failure = Object.assign(new Error('UNSAFE_TRANSACTION: Only use sql.begin, sql.reserved or max: 1'), {
    code: 'UNSAFE_TRANSACTION',
  });
  return {
    begin: async (fn: (tx: unknown) => Promise<unknown>) => {
      if (behaviour === 'fails') throw failure;
      return fn({});
    },
  } as unknown as Sql;
}

describe('the errors of a PostgreSQL transaction', () => {
  for (const queryTimeoutMs of [0, 5_000]) {
    it(`calls a failure of the driver around the callback a lost connection, retryable (answer limit ${queryTimeoutMs})`, async () => {
      const session = new PostgresSession(clientWhoseBegin('fails'), { queryTimeoutMs });
      const error = await session.transaction(async () => 'never').catch((err: unknown) => err);
      expect(isSqlError(error, 'connection-lost')).toBe(true);
      expect((error as { retryable: boolean }).retryable).toBe(true);
      expect((error as Error).message).toBe('the database driver failed around a transaction (UNSAFE_TRANSACTION)');
    });

    it(`passes what the callback throws through untouched (answer limit ${queryTimeoutMs})`, async () => {
      const session = new PostgresSession(clientWhoseBegin('runs'), { queryTimeoutMs });
      const thrown = new ComputeError('CONFLICT', 'taken');
      const plain = new Error('mine');
      await expect(
        session.transaction(async () => {
          throw thrown;
        }),
      ).rejects.toBe(thrown);
      await expect(
        session.transaction(async () => {
          throw plain;
        }),
      ).rejects.toBe(plain);
    });
  }
});
