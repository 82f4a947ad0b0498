import type { Clock, Logger, SqlDatabase } from '@better-compute/core';
import type { VerifiedCertificate } from '../ca/agent-certificates';
import { createLastingListen } from './lasting-listen';

/**
 * The channel on which every change to an issued certificate or to the CA is announced at commit (pki's migration
 * puts a trigger on both tables): the payload is the certificate's serial, or `*` for all of them.
 *
 * @example
 * ```ts
 * await database.listen(CERTIFICATES_CHANNEL, (serial) => forget(serial));
 * ```
 */
export const CERTIFICATES_CHANNEL = 'bc_pki_certificates';

/**
 * The longest the agent API trusts a certificate check it remembers, whatever it heard since: 60 s. A revocation is
 * refused as soon as its notification reaches the server; this bounds it when a notification is lost.
 *
 * @example
 * ```ts
 * await sleep(CHECKED_CERTIFICATE_TTL_MS); // the next call checks the certificate in the database again
 * ```
 */
export const CHECKED_CERTIFICATE_TTL_MS = 60_000;

// About 1.3 KB each (the PEM is the socket's, shared): 10,000 connected agents in 13 MB.
const CHECKED_CERTIFICATES_KEPT = 10_000;

/** The certificate checks the agent API remembers between the calls of a connected agent. */
export interface CheckedCertificates {
  /** Starts listening for certificate changes; until it listens (or when it cannot), nothing is remembered. */
  listen(): Promise<void>;
  /** What `check(pem)` says, from memory when a check of this PEM is remembered, fresh and not expired. */
  verify(pem: string): Promise<VerifiedCertificate>;
  /** How many checks are remembered. */
  size(): number;
  /** Stops listening and forgets everything. */
  close(): Promise<void>;
}

interface Entry {
  verified: VerifiedCertificate;
  checkedAt: number;
}

/**
 * Remembers each agent certificate's successful check, so the calls of a connected agent cost no statement for their
 * certificate: an agent makes four calls per command (poll, ack, start, complete), each of which read the CA and the
 * certificate's row. A remembered check is forgotten when the certificate's row or the CA changes (the NOTIFY on
 * {@link CERTIFICATES_CHANNEL}, so a revocation on any server is refused on every server within the notification's
 * delay), when the listening connection comes back (what was notified meanwhile is gone), when the certificate expires
 * under `clock`, and after {@link CHECKED_CERTIFICATE_TTL_MS} in any case. A refusal is never remembered.
 *
 * @example
 * ```ts
 * const certificates = createCheckedCertificates(database, (pem) => security.verifyAgentCertificate(database, pem), clock, log);
 * await certificates.listen();
 * const { nodeId } = await certificates.verify(pem);
 * ```
 */
export function createCheckedCertificates(
  database: SqlDatabase,
  check: (pem: string) => Promise<VerifiedCertificate>,
  clock: Clock,
  log: Logger,
): CheckedCertificates {
  const byPem = new Map<string, Entry>();
  const pemBySerial = new Map<string, string>();
  // Bumped by every notification: a check that was under way when one came is not remembered, since it may have read
  // the row before the change.
  let generation = 0;
  let closed = false;

  function forget(pem: string): void {
    const entry = byPem.get(pem);
    if (!entry) return;
    byPem.delete(pem);
    if (pemBySerial.get(entry.verified.serial) === pem) pemBySerial.delete(entry.verified.serial);
  }

  function forgetAll(): void {
    generation += 1;
    byPem.clear();
    pemBySerial.clear();
  }

  function changed(payload: string): void {
    generation += 1;
    if (payload === '*') {
      forgetAll();
      return;
    }
    const pem = pemBySerial.get(payload);
    if (pem !== undefined) forget(pem);
  }

  // Nothing is remembered until the LISTEN is in place, and everything is forgotten each time it is (again): what
  // changed while it was not is not known.
  const changes = createLastingListen({
    database,
    channel: CERTIFICATES_CHANNEL,
    onNotify: changed,
    onListen: forgetAll,
    log,
    failure: 'every call checks its certificate',
  });

  return {
    listen: () => changes.ensure(),

    async verify(pem) {
      const entry = byPem.get(pem);
      if (entry) {
        const fresh = performance.now() - entry.checkedAt < CHECKED_CERTIFICATE_TTL_MS;
        if (fresh && clock.now() < entry.verified.expiresAt) return entry.verified;
        // Stale or expired: checked again, which refuses it with the reason the check gives.
        forget(pem);
      }
      const started = generation;
      const verified = await check(pem);
      if (changes.listening() && !closed && started === generation) {
        const previous = pemBySerial.get(verified.serial);
        if (previous !== undefined) forget(previous);
        byPem.set(pem, { verified, checkedAt: performance.now() });
        pemBySerial.set(verified.serial, pem);
        if (byPem.size > CHECKED_CERTIFICATES_KEPT) forget(byPem.keys().next().value as string);
      }
      return verified;
    },

    size: () => byPem.size,

    async close() {
      closed = true;
      forgetAll();
      await changes.close();
    },
  };
}
