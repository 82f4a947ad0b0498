import type { SqlExecutor } from '../sql/executor';

/** What {@link AttestationPort.verify} checks: a node's command result bytes and the `attested` claim sent with them. */
export interface AttestedResultInput {
  /** The node whose own key must have signed the result. */
  nodeId: string;
  /** The result exactly as the agent sent it. */
  result: Uint8Array;
  /** The command's `attested` (for pki: `{ alg, signature, certificateSerial }`). */
  attested: unknown;
}

/**
 * The attested-result verifier port (`ctx.attestation`): checks that a command result was signed by the node's own,
 * current key. Every refusal is DRIVER_ERROR with `details.reason` (a tampered, unsigned or other node's result). pki
 * provides it (`pki(...).attestation()`); without it, a step that must trust a result refuses with INVALID_CONFIG.
 *
 * @example
 * ```ts
 * const { result, attested } = await awaitCommand(ctx, { nodeId, kind: 'disk.wipe', payload: {} });
 * if (!ctx.attestation) throw new ComputeError('INVALID_CONFIG', 'a wipe must be verified: pass attestation');
 * await ctx.attestation.verify(ctx.sql, { nodeId, result: result ?? new Uint8Array(), attested });
 * ```
 */
export interface AttestationPort {
  verify(sql: SqlExecutor, input: AttestedResultInput): Promise<{ certificateSerial: string }>;
}
