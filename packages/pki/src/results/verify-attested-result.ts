import { type Clock, ComputeError, type ErrorReason, type SqlExecutor } from '@better-compute/core';
import { parseCertificatePem } from '../ca/agent-certificates';
import { fromBase64 } from '../crypto/encoding';
import { parsePublicKey, type SignatureAlgorithm } from '../crypto/keys';
import { verifyBytes } from '../crypto/signatures';

/**
 * The `attested` part of a node-signed command result: the signature (base64url) over the result's raw bytes, the
 * algorithm, and the serial (hex) of the node certificate whose key signed it.
 */
export interface AttestedResult {
  alg: SignatureAlgorithm;
  signature: string;
  certificateSerial: string;
}

/** What {@link verifyAttestedResult} checks. */
export interface VerifyAttestedResultInput {
  nodeId: string;
  result: Uint8Array;
  attested: unknown;
}

function refuse(reason: ErrorReason<'DRIVER_ERROR'>, message: string, path: (string | number)[] = ['attested']): never {
  throw new ComputeError('DRIVER_ERROR', message, { details: { path, reason } });
}

/**
 * Checks a node-signed command result against the node's current certificate: the certificate named by
 * `attested.certificateSerial` must be the node's own, not revoked and not expired under the Clock, and the signature
 * must verify over the exact result bytes with that certificate's key. Every failure is DRIVER_ERROR with
 * `details.reason`: `attestation-malformed`, `certificate-unknown`, `certificate-other-node`, `certificate-revoked`,
 * `certificate-expired`, `algorithm-mismatch` or `signature-invalid`.
 *
 * @example
 * ```ts
 * const { commandId, result, attested } = await awaitCommand(ctx, { nodeId, kind: 'deploy.wipe', payload });
 * await verifyAttestedResult(ctx.sql, { nodeId, result, attested }, { clock: ctx.clock });
 * ```
 */
export async function verifyAttestedResult(
  sql: SqlExecutor,
  input: VerifyAttestedResultInput,
  deps: { clock: Clock },
): Promise<{ certificateSerial: string }> {
  if (typeof input !== 'object' || input === null)
    refuse('attestation-malformed', 'expected { nodeId, result, attested }', []);
  const attested = input.attested as Partial<AttestedResult> | null;
  if (typeof attested !== 'object' || attested === null) refuse('attestation-malformed', 'the result is not attested');
  if (attested.alg !== 'ed25519' && attested.alg !== 'es256') {
    refuse('attestation-malformed', 'attested.alg must be ed25519 or es256', ['attested', 'alg']);
  }
  if (typeof attested.certificateSerial !== 'string' || !/^[0-9a-fA-F]{1,64}$/.test(attested.certificateSerial)) {
    refuse('attestation-malformed', 'attested.certificateSerial must be hex', ['attested', 'certificateSerial']);
  }
  if (!(input.result instanceof Uint8Array)) refuse('attestation-malformed', 'the result must be bytes', ['result']);
  let signature: Uint8Array;
  try {
    signature = fromBase64(attested.signature, ['attested', 'signature']);
  } catch {
    refuse('attestation-malformed', 'attested.signature must be base64', ['attested', 'signature']);
  }
  const serial = attested.certificateSerial.toLowerCase();
  const { rows } = await sql.query<{
    node_id: string;
    certificate_pem: string;
    not_after: Date;
    revoked_at: Date | null;
  }>('SELECT node_id, certificate_pem, not_after, revoked_at FROM pki_certificates WHERE serial = $1', [serial]);
  const row = rows[0];
  if (!row) refuse('certificate-unknown', 'the attesting certificate was not issued here');
  if (row.node_id !== input.nodeId)
    refuse('certificate-other-node', "the result is signed with another node's certificate");
  if (row.revoked_at) refuse('certificate-revoked', 'the attesting certificate has been revoked');
  if (deps.clock.now() >= row.not_after) refuse('certificate-expired', 'the attesting certificate has expired');
  const certificate = parseCertificatePem(row.certificate_pem);
  const key = parsePublicKey(certificate.publicKey.toString('pem'), ['attested', 'certificateSerial']);
  if (key.alg !== attested.alg)
    refuse('algorithm-mismatch', "attested.alg is not the certificate key's algorithm", ['attested', 'alg']);
  if (!verifyBytes(key, input.result, signature)) {
    refuse('signature-invalid', 'the result does not match its signature', ['attested', 'signature']);
  }
  return { certificateSerial: serial };
}
