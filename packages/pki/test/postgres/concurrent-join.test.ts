import { isComputeError, isSqlError } from '@better-compute/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSigningKeyPair } from '../../src';
import { scratchPostgres, TEST_DATABASE_URL } from '../support/database';
import { createHarness, type Harness, issueTracked } from '../support/harness';

const JOINS = 100;
const HANDLES = 20; // 20 pools of 2 connections: 40 real connections racing, within the server's limit

/**
 * An agent calls again when its call failed for a reason that is not an answer (a connection that could not be opened
 * in time on a busy machine, a server with no free connection slot): only refusals are the token's answer.
 */
async function joinRetryingTransient<T>(join: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await join();
    } catch (error) {
      if (attempt >= 5 || !isSqlError(error) || !error.retryable) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
    }
  }
}

describe.runIf(TEST_DATABASE_URL)('postgres: concurrent joins', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness(await scratchPostgres());
  });
  afterAll(() => h?.scratch.drop());

  it('a single-use token gives exactly one success among 100 concurrent joins on separate connections', async () => {
    const { id, token } = await issueTracked(h, {
      tenantId: 'root',
      role: 'discovery',
      siteId: 'site_root',
      ttlSeconds: 600,
      maxUses: 1,
    });
    const handles = Array.from({ length: HANDLES }, () => h.scratch.connect({ max: 2 }));
    // A key per join: a hundred agents racing for one token (the same key asking again would be answered again).
    const keys = Array.from({ length: JOINS }, () => generateSigningKeyPair('ed25519').publicJwk);
    const outcomes = await Promise.allSettled(
      Array.from({ length: JOINS }, (_, i) => {
        const db = handles[i % HANDLES];
        if (!db) throw new Error('no handle');
        return joinRetryingTransient(() => db.transaction((tx) => h.pki.joinAgent(tx, { token, publicKey: keys[i] })));
      }),
    );
    const successes = outcomes.filter((o) => o.status === 'fulfilled');
    const refusals = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason] : []));
    expect(successes).toHaveLength(1);
    expect(refusals).toHaveLength(JOINS - 1);
    for (const refusal of refusals) {
      expect(isComputeError(refusal, 'UNAUTHENTICATED')).toBe(true);
      expect((refusal as { details: { reason: string } }).details.reason).toBe('token-exhausted');
    }
    const { rows } = await h.scratch.db.query<{ uses: number }>('SELECT uses FROM pki_join_tokens WHERE id = $1', [id]);
    expect(rows[0]?.uses).toBe(1);
    const nodes = await h.scratch.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM nodes WHERE kind = 'machine'",
    );
    expect(nodes.rows[0]?.n).toBe(1);
    const certificates = await h.scratch.db.query<{ n: number }>('SELECT count(*)::int AS n FROM pki_certificates');
    expect(certificates.rows[0]?.n).toBe(1);
  });
});
