import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scratchPglite } from '../support/database';
import { computeErrorOf } from '../support/errors';
import { createHarness, type Harness, joinNewAgent } from '../support/harness';

// verifyAgentCertificate remembers the parse and the CA's signature check of certificates it has verified; what the
// database and the clock decide must still be decided on every call.

let h: Harness;

beforeAll(async () => {
  h = await createHarness(await scratchPglite(), { certificateTtlSeconds: 3600 });
});
afterAll(() => h.scratch.drop());

describe('a certificate verified before', () => {
  it('is refused once revoked', async () => {
    const joined = await joinNewAgent(h);
    expect((await h.pki.verifyAgentCertificate(h.scratch.db, joined.certificatePem)).nodeId).toBe(joined.nodeId);
    await h.scratch.db.transaction((tx) => h.pki.revokeCertificate(tx, joined.serial, 'key-compromise'));
    const error = await computeErrorOf(
      h.pki.verifyAgentCertificate(h.scratch.db, joined.certificatePem),
      'UNAUTHENTICATED',
    );
    expect(error.details.reason).toBe('certificate-revoked');
  });

  it('is refused once expired under the clock, and accepted again before', async () => {
    const joined = await joinNewAgent(h);
    await h.pki.verifyAgentCertificate(h.scratch.db, joined.certificatePem);
    h.clock.advance(3600_000);
    try {
      const error = await computeErrorOf(
        h.pki.verifyAgentCertificate(h.scratch.db, joined.certificatePem),
        'UNAUTHENTICATED',
      );
      expect(error.details.reason).toBe('certificate-expired');
    } finally {
      h.clock.advance(-3600_000);
    }
    expect((await h.pki.verifyAgentCertificate(h.scratch.db, joined.certificatePem)).serial).toBe(joined.serial);
  });

  it('is refused when its row no longer matches (not issued here)', async () => {
    const joined = await joinNewAgent(h);
    await h.pki.verifyAgentCertificate(h.scratch.db, joined.certificatePem);
    await h.scratch.db.query('DELETE FROM pki_certificates WHERE serial = $1', [joined.serial]);
    const error = await computeErrorOf(
      h.pki.verifyAgentCertificate(h.scratch.db, joined.certificatePem),
      'UNAUTHENTICATED',
    );
    expect(error.details.reason).toBe('certificate-unknown');
  });

  it('by another CA is untrusted here, and stays trusted there', async () => {
    const other = await createHarness(await scratchPglite());
    try {
      const foreign = await joinNewAgent(other);
      expect((await other.pki.verifyAgentCertificate(other.scratch.db, foreign.certificatePem)).nodeId).toBe(
        foreign.nodeId,
      );
      const error = await computeErrorOf(
        h.pki.verifyAgentCertificate(h.scratch.db, foreign.certificatePem),
        'UNAUTHENTICATED',
      );
      expect(error.details.reason).toBe('certificate-untrusted');
      expect((await other.pki.verifyAgentCertificate(other.scratch.db, foreign.certificatePem)).nodeId).toBe(
        foreign.nodeId,
      );
    } finally {
      await other.scratch.drop();
    }
  });
});
