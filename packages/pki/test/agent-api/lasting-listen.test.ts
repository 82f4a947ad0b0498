import type { SqlDatabase } from '@better-compute/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLastingListen } from '../../src/agent-api/lasting-listen';
import { recordingLogger, type Scratch, scratchPglite, scratchPostgres, TEST_DATABASE_URL } from '../support/database';

// The agent API's LISTENs (new commands, certificate changes) must not stay down for the life of the process because
// the database was unreachable at the moment of the first call.

async function eventually(done: () => boolean): Promise<void> {
  const until = Date.now() + 5_000;
  while (!done()) {
    if (Date.now() > until) throw new Error('not within 5 s');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** The real database, whose first `failures` LISTENs fail as they would with the database down. */
function failingFirst(db: SqlDatabase, failures: number): { database: SqlDatabase; attempts: () => number } {
  let attempts = 0;
  const database = new Proxy(db, {
    get(target, property) {
      if (property === 'listen') {
        return (...args: Parameters<SqlDatabase['listen']>) => {
          attempts += 1;
          if (attempts <= failures) return Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:5432'));
          return target.listen(...args);
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { database, attempts: () => attempts };
}

function suite(name: string, open: () => Promise<Scratch>) {
  describe(`a lasting LISTEN (${name})`, () => {
    let scratch: Scratch;
    beforeAll(async () => {
      scratch = await open();
    });
    afterAll(() => scratch.drop());

    it('tries again after a failed LISTEN, no sooner than retryMs, then hears notifications', async () => {
      const log = recordingLogger();
      const { database, attempts } = failingFirst(scratch.db, 1);
      const heard: string[] = [];
      let listens = 0;
      const channel = `bc_test_lasting_${name}`;
      const lasting = createLastingListen({
        database,
        channel,
        onNotify: (payload) => heard.push(payload),
        onListen: () => {
          listens += 1;
        },
        log,
        failure: 'carrying on without',
        retryMs: 200,
      });
      try {
        await lasting.ensure();
        expect(lasting.listening()).toBe(false);
        expect(listens).toBe(0);
        expect(log.lines.filter((line) => line.includes(`cannot listen on ${channel}`))).toHaveLength(1);
        // Within retryMs: no new attempt.
        await lasting.ensure();
        expect(attempts()).toBe(1);
        await new Promise((resolve) => setTimeout(resolve, 250));
        await Promise.all([lasting.ensure(), lasting.ensure()]);
        expect(attempts()).toBe(2);
        expect(lasting.listening()).toBe(true);
        expect(listens).toBe(1);
        await scratch.db.query(`SELECT pg_notify('${channel}', 'after the retry')`);
        await eventually(() => heard.includes('after the retry'));
        // Listening: later calls share it.
        await lasting.ensure();
        expect(attempts()).toBe(2);
      } finally {
        await lasting.close();
      }
      expect(lasting.listening()).toBe(false);
      await lasting.ensure();
      expect(attempts()).toBe(2);
    });
  });
}

suite('pglite', scratchPglite);
if (TEST_DATABASE_URL) suite('postgres', scratchPostgres);
