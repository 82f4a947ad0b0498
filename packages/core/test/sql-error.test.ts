import { describe, expect, it } from 'vitest';
import { classifySqlState, toSqlError } from '../src/sql';

describe('the classification of database errors', () => {
  it.each([
    ['57P01', 'admin_shutdown'],
    ['57P02', 'crash_shutdown'],
    ['57P03', 'cannot_connect_now'],
    ['25P03', 'idle_in_transaction_session_timeout'],
    ['57P05', 'idle_session_timeout'],
    ['53300', 'too_many_connections'],
    ['08006', 'connection_failure'],
    ['ECONNRESET', 'a reset socket'],
    ['CONNECTION_CLOSED', "postgres.js's closed connection"],
  ])('calls %s (%s) a lost connection, which is retryable', (code) => {
    expect(classifySqlState(code)).toBe('connection-lost');
    expect(toSqlError({ code, message: 'x' }).retryable).toBe(true);
  });

  it('keeps a statement the server cancelled (57014) and a unique violation out of the retryable ones', () => {
    expect(toSqlError({ code: '57014', message: 'x' })).toMatchObject({ reason: 'query-canceled', retryable: false });
    expect(toSqlError({ code: '23505', message: 'x' })).toMatchObject({ reason: 'unique-violation', retryable: false });
  });
});
