import { type Clock, ComputeError, newId, type SqlExecutor } from '@better-compute/core';
import { canonicalBytes } from '../crypto/canonical-json';
import { fromBase64 } from '../crypto/encoding';
import { parsePublicKey } from '../crypto/keys';
import { verifyBytes } from '../crypto/signatures';
import { optionalString, requireObject, requireString } from '../tokens/validate';

const DIGEST = /^sha256:[0-9a-f]{64}$/;

/** What allowlisting a signer takes. `tenantId` null (or `public: true`) makes it trusted by every tenant. */
export interface ImageSignerInput {
  tenantId?: string | null;
  public?: boolean;
  name: string;
  publicKey: unknown;
}

/** What an image verifier is asked. */
export interface ImageVerificationInput {
  tenantId: string;
  digest: string;
  signature: string;
  signerId?: string;
}

/** Checks an image's signature for a tenant; resolves to the signer that vouches for it, or throws. */
export type ImageVerifier = (sql: SqlExecutor, input: ImageVerificationInput) => Promise<{ signerId: string }>;

/**
 * The bytes an image signature covers: the canonical JSON `{"digest":"sha256:…","type":"better-compute.image.v1"}`.
 *
 * @example
 * ```ts
 * const signature = signToBase64Url(signerKeyPem, imageSigningBytes('sha256:…'));
 * ```
 */
export function imageSigningBytes(digest: string): Uint8Array {
  if (typeof digest !== 'string' || !DIGEST.test(digest)) {
    throw new ComputeError('INVALID_INPUT', 'digest must be sha256:<64 lower-case hex digits>', {
      details: { path: ['digest'] },
    });
  }
  return canonicalBytes({ digest, type: 'better-compute.image.v1' });
}

/**
 * Allowlists an image signer (Ed25519 or ECDSA P-256 public key, JWK or SPKI PEM); returns its id (`sgn_…`).
 *
 * @example
 * ```ts
 * const { id } = await addImageSigner(tx, { tenantId: 'acme', name: 'acme release key', publicKey: pem }, { clock });
 * ```
 */
export async function addImageSigner(
  tx: SqlExecutor,
  input: ImageSignerInput,
  deps: { clock: Clock },
): Promise<{ id: string }> {
  const object = requireObject(input, []);
  const tenantId = optionalString(object.tenantId, ['tenantId']) ?? null;
  const name = requireString(object.name, ['name']);
  const key = parsePublicKey(object.publicKey, ['publicKey']);
  if (object.public !== undefined && typeof object.public !== 'boolean') {
    throw new ComputeError('INVALID_INPUT', 'public must be a boolean', { details: { path: ['public'] } });
  }
  if (tenantId) {
    const tenant = await tx.query('SELECT 1 FROM tenants WHERE id = $1', [tenantId]);
    if (tenant.rowCount === 0)
      throw new ComputeError('NOT_FOUND', 'no such tenant', { details: { path: ['tenantId'] } });
  }
  const id = newId('sgn');
  await tx.query(
    `INSERT INTO pki_image_signers (id, tenant_id, public, name, algorithm, public_key_pem, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [id, tenantId, object.public === true || tenantId === null, name, key.alg, key.spkiPem, deps.clock.now()],
  );
  return { id };
}

/**
 * Removes a signer from the allowlist; images it signed no longer verify. An unknown id is NOT_FOUND.
 *
 * @example
 * ```ts
 * await revokeImageSigner(tx, 'sgn_01k…', { clock });
 * ```
 */
export async function revokeImageSigner(tx: SqlExecutor, id: string, deps: { clock: Clock }): Promise<void> {
  const { rowCount } = await tx.query(
    'UPDATE pki_image_signers SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1',
    [id, deps.clock.now()],
  );
  if (rowCount === 0) throw new ComputeError('NOT_FOUND', 'no such image signer', { details: { path: ['id'] } });
}

/**
 * The default image verifier: the signature over {@link imageSigningBytes} must verify against a signer allowlisted
 * for the tenant (its own, or public), or the named `signerId` only. A signer that is unknown to the tenant is
 * PERMISSION_DENIED `signer-unknown`; a signature no allowed signer made is PERMISSION_DENIED `signature-invalid`;
 * malformed input is INVALID_INPUT with `details.path`.
 *
 * @example
 * ```ts
 * const { signerId } = await imageVerifier(sql, { tenantId: 'acme', digest: 'sha256:…', signature });
 * ```
 */
export const imageVerifier: ImageVerifier = async (sql, input) => {
  const object = requireObject(input, []);
  const tenantId = requireString(object.tenantId, ['tenantId']);
  const bytes = imageSigningBytes(object.digest as string);
  const signature = fromBase64(object.signature, ['signature']);
  const signerId = optionalString(object.signerId, ['signerId']);
  const { rows } = await sql.query<{ id: string; public_key_pem: string }>(
    `SELECT id, public_key_pem FROM pki_image_signers
     WHERE revoked_at IS NULL AND (tenant_id = $1 OR tenant_id IS NULL OR public) AND ($2::text IS NULL OR id = $2)
     ORDER BY id`,
    [tenantId, signerId ?? null],
  );
  if (signerId && rows.length === 0) {
    throw new ComputeError('PERMISSION_DENIED', 'the signer is not allowlisted for this tenant', {
      details: { path: ['signerId'], reason: 'signer-unknown' },
    });
  }
  const signer = rows.find((row) => verifyBytes(row.public_key_pem, bytes, signature));
  if (!signer) {
    throw new ComputeError('PERMISSION_DENIED', 'no allowlisted signer made this signature', {
      details: { path: ['signature'], reason: rows.length === 0 ? 'signer-unknown' : 'signature-invalid' },
    });
  }
  return { signerId: signer.id };
};
