import { createPublicKey, X509Certificate } from 'node:crypto';
import type { SqlExecutor } from '@better-compute/core';
import type { IssueDeps } from '../ca/agent-certificates';
import { ensureCertificateAuthority } from '../ca/authority';
import type { PublicKeyInfo } from '../crypto/keys';

/**
 * How long after a join its answer can be had again with the same token and public key: 10 minutes.
 *
 * @example
 * ```ts
 * clock.advance(JOIN_ANSWER_AGAIN_MS + 1); // the spent token is refused token-exhausted from now on
 * ```
 */
export const JOIN_ANSWER_AGAIN_MS = 10 * 60_000;

/** A certificate an earlier join with the token issued, as a join answers it. */
export interface EarlierJoinAnswer {
  nodeId: string;
  tenantId: string;
  siteId: string | null;
  serial: string;
  certificatePem: string;
  caCertificatePem: string;
  expiresAt: Date;
}

interface CertificateRow {
  serial: string;
  node_id: string;
  tenant_id: string;
  site_id: string | null;
  certificate_pem: string;
  not_after: Date;
}

const spki = (pem: string): Buffer => new X509Certificate(pem).publicKey.export({ type: 'spki', format: 'der' });

/**
 * The answer of an earlier join with a token that has no use left, when the same agent asks again: the certificate
 * that join issued for the same public key, within {@link JOIN_ANSWER_AGAIN_MS} of it, still valid and not revoked (a
 * later join of the node supersedes it). An agent whose join answer was lost on the way (a dropped connection, a
 * timeout) gets it again instead of being stuck with a spent single-use token; nothing new is issued, and only the
 * holder of the private key can use what it gets. Undefined when there is no such certificate.
 *
 * @example
 * ```ts
 * const again = await earlierJoinAnswer(tx, token.id, publicKey, now, deps);
 * ```
 */
export async function earlierJoinAnswer(
  tx: SqlExecutor,
  tokenId: string,
  publicKey: PublicKeyInfo,
  now: Date,
  deps: IssueDeps,
): Promise<EarlierJoinAnswer | undefined> {
  const { rows } = await tx.query<CertificateRow>(
    `SELECT serial, node_id, tenant_id, site_id, certificate_pem, not_after FROM pki_certificates
     WHERE join_token_id = $1 AND revoked_at IS NULL AND not_after > $2 AND created_at > $3
     ORDER BY created_at DESC LIMIT 5`,
    [tokenId, now, new Date(now.getTime() - JOIN_ANSWER_AGAIN_MS)],
  );
  const presented = createPublicKey({ key: publicKey.spkiPem, format: 'pem' }).export({ type: 'spki', format: 'der' });
  const row = rows.find((candidate) => spki(candidate.certificate_pem).equals(presented));
  if (!row) return undefined;
  const ca = await ensureCertificateAuthority(tx, deps);
  // Issued by a CA that has since been replaced: it would be refused on its first call, so the agent needs a new join.
  if (!new X509Certificate(row.certificate_pem).verify(new X509Certificate(ca.certificatePem).publicKey))
    return undefined;
  return {
    nodeId: row.node_id,
    tenantId: row.tenant_id,
    siteId: row.site_id,
    serial: row.serial,
    certificatePem: row.certificate_pem,
    caCertificatePem: ca.certificatePem,
    expiresAt: row.not_after,
  };
}
