import { ComputeError, type ErrorReason, type SqlExecutor } from '@better-compute/core';
import { type PublicKeyInfo, parsePublicKey } from '../crypto/keys';
import { CA_ID, type CaDeps, ensureCertificateAuthority } from './authority';
import { importPublicKey, randomSerial, webCryptoParams, x509 } from './x509';

/** Default lifetime of an agent certificate: 7 days; agents renew well before (see the README). */
export const DEFAULT_CERTIFICATE_TTL_SECONDS = 7 * 24 * 3600;

/** Who a certificate names. */
export interface AgentIdentity {
  nodeId: string;
  tenantId: string;
  siteId: string | null;
  role: string;
}

/** An issued certificate. */
export interface IssuedCertificate extends AgentIdentity {
  serial: string;
  certificatePem: string;
  caCertificatePem: string;
  notBefore: Date;
  expiresAt: Date;
}

/** A certificate that passed {@link verifyAgentCertificate}. */
export interface VerifiedCertificate extends AgentIdentity {
  serial: string;
  expiresAt: Date;
}

/** What issuing needs beyond the CA's: the lifetime. */
export interface IssueDeps extends CaDeps {
  certificateTtlSeconds?: number;
}

/**
 * The SPIFFE-style URI SAN of an agent: `spiffe://better-compute/tenant/<t>/site/<s or ->/node/<id>/role/<r>`, each
 * segment URI-encoded.
 *
 * @example
 * ```ts
 * agentUri({ tenantId: 'root', siteId: 'site_01k…', nodeId: 'node_01k…', role: 'node' });
 * ```
 */
export function agentUri(identity: AgentIdentity): string {
  const part = (value: string | null) => (value === null ? '-' : encodeURIComponent(value));
  return `spiffe://better-compute/tenant/${part(identity.tenantId)}/site/${part(identity.siteId)}/node/${part(identity.nodeId)}/role/${part(identity.role)}`;
}

/**
 * Issues an X.509 certificate for an agent's public key (Ed25519 or ECDSA P-256), signed by the CA: CN = node id,
 * O = tenant, OU = role, the {@link agentUri} SAN, client and server auth, valid from five minutes ago (clock skew)
 * for `certificateTtlSeconds`. The certificate is recorded by serial, so it can be revoked.
 *
 * @example
 * ```ts
 * const cert = await issueAgentCertificate(tx, { nodeId, tenantId: 'root', siteId, role: 'node' }, agentJwk, { key, clock });
 * ```
 */
export async function issueAgentCertificate(
  tx: SqlExecutor,
  identity: AgentIdentity,
  publicKey: unknown,
  deps: IssueDeps,
  joinTokenId?: string,
): Promise<IssuedCertificate> {
  const subjectKey: PublicKeyInfo = parsePublicKey(publicKey, ['publicKey']);
  const ca = await ensureCertificateAuthority(tx, deps);
  const now = deps.clock.now();
  const notBefore = new Date(now.getTime() - 5 * 60_000);
  const expiresAt = new Date(now.getTime() + (deps.certificateTtlSeconds ?? DEFAULT_CERTIFICATE_TTL_SECONDS) * 1000);
  const serial = randomSerial();
  const subjectCryptoKey = await importPublicKey(subjectKey);
  const certificate = await x509.X509CertificateGenerator.create({
    serialNumber: serial,
    subject: [{ CN: [identity.nodeId] }, { O: [identity.tenantId] }, { OU: [identity.role] }],
    issuer: ca.certificate.subjectName,
    notBefore,
    notAfter: expiresAt,
    signingAlgorithm: webCryptoParams(ca.algorithm).signing,
    publicKey: subjectCryptoKey,
    signingKey: ca.signingKey,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth, x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension([{ type: 'url', value: agentUri(identity) }]),
      await x509.SubjectKeyIdentifierExtension.create(subjectCryptoKey),
      await x509.AuthorityKeyIdentifierExtension.create(ca.certificate.publicKey),
    ],
  });
  const certificatePem = certificate.toString('pem');
  await tx.query(
    `INSERT INTO pki_certificates (serial, node_id, tenant_id, site_id, role, join_token_id, certificate_pem, not_before, not_after, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
    [
      serial,
      identity.nodeId,
      identity.tenantId,
      identity.siteId,
      identity.role,
      joinTokenId ?? null,
      certificatePem,
      notBefore,
      expiresAt,
      now,
    ],
  );
  return { ...identity, serial, certificatePem, caCertificatePem: ca.certificatePem, notBefore, expiresAt };
}

function refuse(reason: ErrorReason<'UNAUTHENTICATED'>, message: string): never {
  throw new ComputeError('UNAUTHENTICATED', message, { details: { path: ['certificate'], reason } });
}

/**
 * Parses a PEM certificate; anything else is INVALID_INPUT at `path` (reason `malformed-certificate`).
 *
 * @example
 * ```ts
 * const cert = parseCertificatePem(pem);
 * ```
 */
export function parseCertificatePem(
  pem: unknown,
  path: readonly (string | number)[] = ['certificate'],
): x509.X509Certificate {
  try {
    if (typeof pem !== 'string' || !pem.includes('-----BEGIN CERTIFICATE-----'))
      throw new Error('not a PEM certificate');
    return new x509.X509Certificate(pem);
  } catch (cause) {
    throw new ComputeError('INVALID_INPUT', 'not a PEM certificate', {
      details: { path, reason: 'malformed-certificate' },
      cause,
    });
  }
}

interface CertificateRow {
  node_id: string;
  tenant_id: string;
  site_id: string | null;
  role: string;
  certificate_pem: string;
  not_after: Date;
  revoked_at: Date | null;
}

/** A row of a LEFT JOIN: every column may be null. */
type Nullable<T> = { [K in keyof T]: T[K] | null };

/** What a certificate's own bytes say once its CA's signature on them checked out: nothing the database decides. */
interface SignedCertificate {
  caPem: string;
  der: Buffer;
  serial: string;
  notBefore: Date;
  notAfter: Date;
}

/** How many signed certificates {@link verifyAgentCertificate} remembers (about 1.5 KB each), oldest forgotten first. */
const SIGNED_CERTIFICATES_KEPT = 10_000;
// Certificate PEM → what parsing it and checking the CA's signature on it found, for the CA PEM it was checked against.
// Parsing (ASN.1 in JavaScript) and the signature check were most of an agent API call's CPU, on every call of every
// agent. Only certificates the CA signed are kept (their size is ours), so presented junk cannot fill it.
const signedCertificates = new Map<string, SignedCertificate>();

/** The DER bytes of a PEM certificate, without parsing it. */
function pemDer(pem: string): Buffer {
  return Buffer.from(pem.replace(/-----[^-]+-----|\s/g, ''), 'base64');
}

/**
 * Checks an agent certificate: signed by this CA, within its validity under the Clock, issued here (by serial, same
 * bytes) and not revoked. Refusals are UNAUTHENTICATED with `details.reason` `certificate-untrusted`,
 * `certificate-not-yet-valid`, `certificate-expired`, `certificate-unknown` or `certificate-revoked`; text that is not
 * a certificate is INVALID_INPUT. The parse and the signature check of a certificate the CA signed are remembered (per
 * CA certificate); the CA, the validity, the issued row and the revocation are checked on every call.
 *
 * @example
 * ```ts
 * const { nodeId, role } = await verifyAgentCertificate(sql, clientCertificatePem, { clock });
 * ```
 */
export async function verifyAgentCertificate(
  sql: SqlExecutor,
  pem: unknown,
  deps: Pick<CaDeps, 'clock'>,
): Promise<VerifiedCertificate> {
  const known = typeof pem === 'string' ? signedCertificates.get(pem) : undefined;
  const certificate = known ? undefined : parseCertificatePem(pem);
  const presentedSerial = known?.serial ?? (certificate as x509.X509Certificate).serialNumber.toLowerCase();
  // One round trip: the CA's certificate, and the row issued under the presented serial (checked below only once the
  // CA's signature on the certificate holds).
  const { rows } = await sql.query<Nullable<CertificateRow> & { ca_pem: string }>(
    `SELECT ca.certificate_pem AS ca_pem, c.node_id, c.tenant_id, c.site_id, c.role, c.certificate_pem, c.not_after,
       c.revoked_at
     FROM pki_ca ca LEFT JOIN pki_certificates c ON c.serial = $2 WHERE ca.id = $1`,
    [CA_ID, presentedSerial],
  );
  const caPem = rows[0]?.ca_pem;
  if (!caPem) refuse('certificate-untrusted', 'no CA has issued certificates yet');
  let signed = known?.caPem === caPem ? known : undefined;
  if (!signed) {
    const parsed = certificate ?? parseCertificatePem(pem);
    const ca = new x509.X509Certificate(caPem);
    const verified =
      parsed.issuer === ca.subject && (await parsed.verify({ publicKey: ca.publicKey, signatureOnly: true }));
    if (!verified) refuse('certificate-untrusted', 'the certificate is not signed by this CA');
    signed = {
      caPem,
      der: Buffer.from(parsed.rawData),
      serial: parsed.serialNumber.toLowerCase(),
      notBefore: parsed.notBefore,
      notAfter: parsed.notAfter,
    };
    signedCertificates.delete(pem as string);
    signedCertificates.set(pem as string, signed);
    if (signedCertificates.size > SIGNED_CERTIFICATES_KEPT) {
      signedCertificates.delete(signedCertificates.keys().next().value as string);
    }
  }
  const now = deps.clock.now();
  if (now < signed.notBefore) refuse('certificate-not-yet-valid', 'the certificate is not valid yet');
  if (now >= signed.notAfter) refuse('certificate-expired', 'the certificate has expired');
  const { serial } = signed;
  const row = rows[0];
  if (!row?.certificate_pem || Buffer.compare(pemDer(row.certificate_pem), signed.der) !== 0) {
    refuse('certificate-unknown', 'the certificate was not issued here');
  }
  if (row.revoked_at) refuse('certificate-revoked', 'the certificate has been revoked');
  return {
    serial,
    nodeId: row.node_id as string,
    tenantId: row.tenant_id as string,
    siteId: row.site_id,
    role: row.role as string,
    expiresAt: row.not_after as Date,
  };
}

/**
 * Revokes one certificate by serial; every later verification refuses it. An unknown serial is NOT_FOUND.
 *
 * @example
 * ```ts
 * await revokeCertificate(tx, serial, 'key-compromise', { clock });
 * ```
 */
export async function revokeCertificate(
  tx: SqlExecutor,
  serial: string,
  reason: string,
  deps: Pick<CaDeps, 'clock'>,
): Promise<void> {
  const { rowCount } = await tx.query(
    'UPDATE pki_certificates SET revoked_at = COALESCE(revoked_at, $2), revoked_reason = COALESCE(revoked_reason, $3) WHERE serial = $1',
    [typeof serial === 'string' ? serial.toLowerCase() : '', deps.clock.now(), reason],
  );
  if (rowCount === 0) throw new ComputeError('NOT_FOUND', 'no such certificate', { details: { path: ['serial'] } });
}

/**
 * Revokes every certificate of a node that is not revoked yet; returns how many.
 *
 * @example
 * ```ts
 * await revokeNodeCertificates(tx, nodeId, 'node-retired', { clock });
 * ```
 */
export async function revokeNodeCertificates(
  tx: SqlExecutor,
  nodeId: string,
  reason: string,
  deps: Pick<CaDeps, 'clock'>,
): Promise<number> {
  const { rowCount } = await tx.query(
    'UPDATE pki_certificates SET revoked_at = $2, revoked_reason = $3 WHERE node_id = $1 AND revoked_at IS NULL',
    [nodeId, deps.clock.now(), reason],
  );
  return rowCount;
}

/**
 * Renews a certificate: the current one must verify; the new one names the same node, tenant, site and role, for the
 * given public key (re-keying) or the current one. The old certificate stays valid until it expires, so an agent can
 * switch over without a gap; revoke it to cut it off.
 *
 * @example
 * ```ts
 * const next = await renewAgentCertificate(tx, { certificatePem: current }, { key, clock });
 * ```
 */
export async function renewAgentCertificate(
  tx: SqlExecutor,
  input: { certificatePem: string; publicKey?: unknown },
  deps: IssueDeps,
): Promise<IssuedCertificate> {
  const current = await verifyAgentCertificate(tx, input?.certificatePem, deps);
  const publicKey = input.publicKey ?? parseCertificatePem(input.certificatePem).publicKey.toString('pem');
  const { serial: _serial, expiresAt: _expiresAt, ...identity } = current;
  return issueAgentCertificate(tx, identity, publicKey, deps);
}
