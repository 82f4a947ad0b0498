import type { webcrypto } from 'node:crypto';
import { isIP } from 'node:net';
import { ComputeError, type SqlExecutor } from '@better-compute/core';
import { type CaDeps, ensureCertificateAuthority } from './authority';
import { randomSerial, subtle, webCryptoParams, x509 } from './x509';

/** What {@link issueServerCertificate} takes: the names the certificate is valid for, and its lifetime. */
export interface ServerCertificateInput {
  /** DNS names (subject alternative names). At least one name or IP. */
  hostnames: readonly string[];
  /** IP addresses (v4 or v6). */
  ips?: readonly string[];
  /** Lifetime in seconds; default 90 days, at most 825 days. */
  ttlSeconds?: number;
}

/** An issued server certificate with its private key, both PEM, and the CA certificate that clients trust. */
export interface IssuedServerCertificate {
  serial: string;
  certificatePem: string;
  /** PKCS#8 PEM. Keep it at mode 0600; it is not stored anywhere by this function. */
  privateKeyPem: string;
  caCertificatePem: string;
  notBefore: Date;
  expiresAt: Date;
}

const DEFAULT_TTL_SECONDS = 90 * 24 * 3600;
const MAX_TTL_SECONDS = 825 * 24 * 3600;
const DNS_NAME = /^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]{0,62})?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62})?)*$/;

function refuse(message: string, path: (string | number)[]): ComputeError {
  return new ComputeError('INVALID_INPUT', message, { details: { path } });
}

function toPem(label: string, der: ArrayBuffer): string {
  const base64 = Buffer.from(der).toString('base64');
  return `-----BEGIN ${label}-----\n${base64.replace(/(.{64})/g, '$1\n').replace(/\n$/, '')}\n-----END ${label}-----\n`;
}

/**
 * Issues a TLS server certificate from the control plane's CA (creating the CA on first use): a fresh ECDSA P-256
 * key, CN = the first name, every name and IP as a subject alternative name, server authentication only, valid from
 * five minutes ago for `ttlSeconds`. Agents and operators who trust the CA certificate trust the server. Nothing is
 * recorded in the database (agent certificates are; a server certificate is replaced by issuing another). Bad names
 * are INVALID_INPUT with `details.path`.
 *
 * @example
 * ```ts
 * const tls = await issueServerCertificate(db, { hostnames: ['cp.example.com'], ips: ['10.0.0.5'] }, { key, clock });
 * https.createServer({ cert: tls.certificatePem, key: tls.privateKeyPem });
 * ```
 */
export async function issueServerCertificate(
  sql: SqlExecutor,
  input: ServerCertificateInput,
  deps: CaDeps,
): Promise<IssuedServerCertificate> {
  const hostnames = [...(input?.hostnames ?? [])];
  const ips = [...(input?.ips ?? [])];
  hostnames.forEach((name, i) => {
    if (typeof name !== 'string' || name.length > 253 || !DNS_NAME.test(name)) {
      throw refuse('a hostname must be a DNS name', ['hostnames', i]);
    }
  });
  ips.forEach((ip, i) => {
    if (typeof ip !== 'string' || isIP(ip) === 0) throw refuse('an IP must be an IPv4 or IPv6 address', ['ips', i]);
  });
  if (hostnames.length + ips.length === 0) throw refuse('name at least one hostname or IP', ['hostnames']);
  const ttlSeconds = input.ttlSeconds ?? DEFAULT_TTL_SECONDS;
  if (!Number.isInteger(ttlSeconds) || ttlSeconds < 60 || ttlSeconds > MAX_TTL_SECONDS) {
    throw refuse(`ttlSeconds must be a whole number from 60 to ${MAX_TTL_SECONDS}`, ['ttlSeconds']);
  }

  const ca = await ensureCertificateAuthority(sql, deps);
  const params = webCryptoParams('es256');
  const keys = (await subtle.generateKey(params.key as webcrypto.EcKeyGenParams, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const now = deps.clock.now();
  const notBefore = new Date(now.getTime() - 5 * 60_000);
  const expiresAt = new Date(now.getTime() + ttlSeconds * 1000);
  const serial = randomSerial();
  const certificate = await x509.X509CertificateGenerator.create({
    serialNumber: serial,
    subject: [{ CN: [hostnames[0] ?? ips[0] ?? 'better-compute'] }, { O: ['better-compute'] }],
    issuer: ca.certificate.subjectName,
    notBefore,
    notAfter: expiresAt,
    signingAlgorithm: webCryptoParams(ca.algorithm).signing,
    publicKey: keys.publicKey,
    signingKey: ca.signingKey,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension([
        ...hostnames.map((value) => ({ type: 'dns' as const, value })),
        ...ips.map((value) => ({ type: 'ip' as const, value })),
      ]),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(ca.certificate.publicKey),
    ],
  });
  const pkcs8 = await subtle.exportKey('pkcs8', keys.privateKey);
  return {
    serial,
    certificatePem: certificate.toString('pem'),
    privateKeyPem: toPem('PRIVATE KEY', pkcs8),
    caCertificatePem: ca.certificatePem,
    notBefore,
    expiresAt,
  };
}
