import type { webcrypto } from 'node:crypto';
import { type Clock, ComputeError, type SqlExecutor } from '@better-compute/core';
import { open, seal } from '../crypto/aead';
import { type CaAlgorithm, type CryptoKey, subtle, webCryptoParams, x509 } from './x509';

/** The id of the CA's one row in `pki_ca`. */
export const CA_ID = 'ca';
const CA_VALIDITY_MS = 10 * 365 * 24 * 3600 * 1000;

/** The loaded CA: its certificate and its private signing key. */
export interface CertificateAuthority {
  algorithm: CaAlgorithm;
  certificate: x509.X509Certificate;
  certificatePem: string;
  signingKey: CryptoKey;
}

/** What the CA functions need: the at-rest key, the clock, and which algorithm a new CA gets. */
export interface CaDeps {
  key: Uint8Array;
  clock: Clock;
  caAlgorithm?: CaAlgorithm;
}

interface CaRow {
  algorithm: string;
  certificate_pem: string;
  sealed_key: string;
}

async function unseal(row: CaRow, key: Uint8Array): Promise<CertificateAuthority> {
  const algorithm = row.algorithm as CaAlgorithm;
  const pkcs8 = open(key, `pki-ca:${CA_ID}`, row.sealed_key);
  const signingKey = await subtle.importKey('pkcs8', pkcs8, webCryptoParams(algorithm).key, false, ['sign']);
  return {
    algorithm,
    certificate: new x509.X509Certificate(row.certificate_pem),
    certificatePem: row.certificate_pem,
    signingKey,
  };
}

/**
 * The CA's certificate, or undefined before the first certificate was issued. Needs no key.
 *
 * @example
 * ```ts
 * const pem = await readCaCertificate(sql); // hand to agents as their trust root
 * ```
 */
export async function readCaCertificate(sql: SqlExecutor): Promise<string | undefined> {
  const { rows } = await sql.query<{ certificate_pem: string }>('SELECT certificate_pem FROM pki_ca WHERE id = $1', [
    CA_ID,
  ]);
  return rows[0]?.certificate_pem;
}

/**
 * Loads the CA, creating it on first use: a self-signed certificate valid ten years with its key sealed under the
 * configured key. Two processes creating it at once keep the first one committed.
 *
 * @example
 * ```ts
 * const ca = await ensureCertificateAuthority(tx, { key, clock });
 * ```
 */
export async function ensureCertificateAuthority(tx: SqlExecutor, deps: CaDeps): Promise<CertificateAuthority> {
  const select = 'SELECT algorithm, certificate_pem, sealed_key FROM pki_ca WHERE id = $1';
  const existing = await tx.query<CaRow>(select, [CA_ID]);
  if (existing.rows[0]) return unseal(existing.rows[0], deps.key);
  const algorithm = deps.caAlgorithm ?? 'ecdsa-p256';
  const params = webCryptoParams(algorithm);
  const keys = (await subtle.generateKey(params.key as webcrypto.EcKeyGenParams, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const now = deps.clock.now();
  const notAfter = new Date(now.getTime() + CA_VALIDITY_MS);
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: [{ CN: ['better-compute agent CA'] }, { O: ['better-compute'] }],
    notBefore: new Date(now.getTime() - 5 * 60_000),
    notAfter,
    signingAlgorithm: params.signing,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const pkcs8 = new Uint8Array(await subtle.exportKey('pkcs8', keys.privateKey));
  await tx.query(
    `INSERT INTO pki_ca (id, algorithm, certificate_pem, sealed_key, not_after, created_at)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING`,
    [CA_ID, algorithm, certificate.toString('pem'), seal(deps.key, `pki-ca:${CA_ID}`, pkcs8), notAfter, now],
  );
  const stored = await tx.query<CaRow>(select, [CA_ID]);
  if (!stored.rows[0]) throw new ComputeError('INTERNAL', 'the CA row vanished after it was written');
  return unseal(stored.rows[0], deps.key);
}
