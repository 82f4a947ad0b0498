import type { ComputeErrorCode } from './codes';

/**
 * The `details.reason` values each error code carries, one table for every package. A reason says why, in a word a
 * program can branch on; the code says what kind of failure it is. A `new ComputeError` with a literal code is checked
 * against its row.
 *
 * @example
 * ```ts
 * ERROR_REASONS.INVALID_STATE.includes('fenced'); // true
 * ```
 */
export const ERROR_REASONS = {
  INVALID_CONFIG: ['bad-key'],
  INVALID_INPUT: [
    'body-too-large',
    'malformed-json',
    'method-not-allowed',
    'invalid-cursor',
    'not-json',
    'malformed-key',
    'malformed-certificate',
    'signature-invalid',
    'ssrf',
    'batch-unknown',
    'batch-tenant-out-of-scope',
    'batch-node-out-of-scope',
    'batch-kind-out-of-scope',
    'batch-expired',
  ],
  INVALID_STATE: [
    'fenced',
    'invalid-transition',
    'session-closed',
    'illegal-move',
    'batch-required',
    'batch-unapproved',
    'batch-expired',
    'batch-rejected',
    'profile-version-used',
    'cleanup',
    // A step's send after the step was aborted, failed or settled.
    'step-ended',
    // A workflow verb refused in the workflow's state names that state.
    'pending',
    'running',
    'paused',
    'failing',
    'cancelling',
    'succeeded',
    'failed',
    'cancelled',
  ],
  NOT_FOUND: ['not-carried'],
  CONFLICT: ['approval-duplicate'],
  UNAUTHENTICATED: [
    'token-unknown',
    'token-expired',
    'token-exhausted',
    'token-revoked',
    'certificate-untrusted',
    'certificate-not-yet-valid',
    'certificate-expired',
    'certificate-unknown',
    'certificate-revoked',
    // The agent API: no client certificate, or one that is not a certificate.
    'certificate-missing',
    'certificate-malformed',
  ],
  PERMISSION_DENIED: [
    'approver-unknown',
    'signature-invalid',
    'signer-unknown',
    'attestation-failed',
    'claims-mismatch',
    'public-requires-root',
    'root-only',
  ],
  TIMEOUT: [],
  REJOIN_TIMEOUT: [],
  NO_SITE_AGENT: [],
  COMMAND_FAILED: [],
  COMMAND_REJECTED: [],
  COMMAND_EXPIRED: [],
  COMMAND_CANCELLED: [],
  DRIVER_ERROR: [
    'attestation-malformed',
    'certificate-unknown',
    'certificate-other-node',
    'certificate-revoked',
    'certificate-expired',
    'algorithm-mismatch',
    'signature-invalid',
  ],
  INTERNAL: ['decrypt-failed'],
} as const satisfies { readonly [C in ComputeErrorCode]: readonly string[] };

/**
 * A `details.reason` of `code` (of any code when left out), from {@link ERROR_REASONS}.
 *
 * @example
 * ```ts
 * const reason: ErrorReason<'UNAUTHENTICATED'> = 'token-expired';
 * ```
 */
export type ErrorReason<C extends ComputeErrorCode = ComputeErrorCode> = (typeof ERROR_REASONS)[C][number];
