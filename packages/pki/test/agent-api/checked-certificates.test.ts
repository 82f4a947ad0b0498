import type { SqlDatabase } from '@better-compute/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHECKED_CERTIFICATE_TTL_MS, createCheckedCertificates } from '../../src/agent-api/checked-certificates';
import { type Scratch, scratchPglite, scratchPostgres, TEST_DATABASE_URL } from '../support/database';
import { computeErrorOf } from '../support/errors';
import { createHarness, type Harness, joinNewAgent } from '../support/harness';

// The agent API remembers a certificate's check between an agent's calls. What must still hold: a revocation (here or
// by another server, on another connection), an expiry under the clock, a change of the certificate's row while it is
// being checked, and a lost LISTEN connection each end the remembering.

/** Waits (up to 5 s) until `done` holds: a notification on PostgreSQL reaches the listener after the commit returns. */
async function eventually(done: () => boolean): Promise<void> {
  const until = Date.now() + 5_000;
  while (!done()) {
    if (Date.now() > until) throw new Error('not within 5 s');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function suite(name: string, open: () => Promise<Scratch>, other: (scratch: Scratch) => SqlDatabase) {
  describe(`remembered certificate checks (${name})`, () => {
    let h: Harness;
    let checks = 0;
    const memory = () =>
      createCheckedCertificates(
        h.scratch.db,
        (pem) => {
          checks += 1;
          return h.pki.verifyAgentCertificate(h.scratch.db, pem);
        },
        h.clock,
        h.log,
      );

    beforeAll(async () => {
      h = await createHarness(await open(), { certificateTtlSeconds: 3600 });
    });
    afterAll(() => h.scratch.drop());

    it('checks a certificate once while it is called with, and refuses it once revoked elsewhere', async () => {
      const certificates = memory();
      try {
        await certificates.listen();
        const joined = await joinNewAgent(h);
        const before = checks;
        for (let i = 0; i < 5; i += 1) {
          expect((await certificates.verify(joined.certificatePem)).nodeId).toBe(joined.nodeId);
        }
        expect(checks - before).toBe(1);
        await other(h.scratch).transaction((tx) => h.pki.revokeCertificate(tx, joined.serial, 'key-compromise'));
        await eventually(() => certificates.size() === 0);
        const error = await computeErrorOf(certificates.verify(joined.certificatePem), 'UNAUTHENTICATED');
        expect(error.details.reason).toBe('certificate-revoked');
        // A refusal is not remembered: every call checks again.
        await computeErrorOf(certificates.verify(joined.certificatePem), 'UNAUTHENTICATED');
        expect(checks - before).toBe(3);
      } finally {
        await certificates.close();
      }
    });

    it('refuses a remembered certificate once it expires under the clock', async () => {
      const certificates = memory();
      try {
        await certificates.listen();
        const joined = await joinNewAgent(h);
        await certificates.verify(joined.certificatePem);
        h.clock.advance(3600_000);
        try {
          const error = await computeErrorOf(certificates.verify(joined.certificatePem), 'UNAUTHENTICATED');
          expect(error.details.reason).toBe('certificate-expired');
        } finally {
          h.clock.advance(-3600_000);
        }
      } finally {
        await certificates.close();
      }
    });

    it('does not remember a check that a change of the certificate overtook', async () => {
      let release: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      const joined = await joinNewAgent(h);
      const certificates = createCheckedCertificates(
        h.scratch.db,
        async (pem) => {
          const verified = await h.pki.verifyAgentCertificate(h.scratch.db, pem);
          await gate; // the row was read; the revocation commits and is notified before the check returns
          return verified;
        },
        h.clock,
        h.log,
      );
      try {
        await certificates.listen();
        const checking = certificates.verify(joined.certificatePem);
        await other(h.scratch).transaction((tx) => h.pki.revokeCertificate(tx, joined.serial, 'key-compromise'));
        await new Promise((resolve) => setTimeout(resolve, 100));
        release();
        expect((await checking).serial).toBe(joined.serial);
        expect(certificates.size()).toBe(0);
      } finally {
        await certificates.close();
      }
    });

    it('remembers nothing until it listens', async () => {
      const certificates = memory();
      try {
        const joined = await joinNewAgent(h);
        await certificates.verify(joined.certificatePem);
        expect(certificates.size()).toBe(0);
      } finally {
        await certificates.close();
      }
    });

    it('forgets every check when the CA row changes, even by hand', async () => {
      const certificates = memory();
      try {
        await certificates.listen();
        const joined = await joinNewAgent(h);
        await certificates.verify(joined.certificatePem);
        expect(certificates.size()).toBe(1);
        await other(h.scratch).query('UPDATE pki_ca SET created_at = created_at');
        await eventually(() => certificates.size() === 0);
      } finally {
        await certificates.close();
      }
    });

    it('checks again after CHECKED_CERTIFICATE_TTL_MS even without a notification', async () => {
      const certificates = memory();
      const realNow = performance.now.bind(performance);
      try {
        await certificates.listen();
        const joined = await joinNewAgent(h);
        await certificates.verify(joined.certificatePem);
        const before = checks;
        performance.now = () => realNow() + CHECKED_CERTIFICATE_TTL_MS;
        await certificates.verify(joined.certificatePem);
        expect(checks - before).toBe(1);
      } finally {
        performance.now = realNow;
        await certificates.close();
      }
    });
  });
}

suite('pglite', scratchPglite, (scratch) => scratch.db);

if (TEST_DATABASE_URL) {
  suite('postgres', scratchPostgres, (scratch) => scratch.connect({ max: 1 }));

  describe('remembered certificate checks when the LISTEN connection is lost (postgres)', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await createHarness(await scratchPostgres(), { certificateTtlSeconds: 3600 });
    });
    afterAll(() => h.scratch.drop());

    it('forgets every check when it listens again, since what was notified meanwhile is gone', async () => {
      const database = h.scratch.connect({ max: 2 });
      const certificates = createCheckedCertificates(
        database,
        (pem) => h.pki.verifyAgentCertificate(database, pem),
        h.clock,
        h.log,
      );
      try {
        await certificates.listen();
        const joined = await joinNewAgent(h);
        await certificates.verify(joined.certificatePem);
        expect(certificates.size()).toBe(1);
        const { rows } = await h.scratch.db.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'listen%'",
        );
        expect(rows).toHaveLength(1);
        await h.scratch.db.query('SELECT pg_terminate_backend($1)', [rows[0]?.pid]);
        await eventually(() => certificates.size() === 0);
      } finally {
        await certificates.close();
      }
    });
  });
}
