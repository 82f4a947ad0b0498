import { ComputeError } from '@better-compute/core';
import { type PublicKeyInfo, parsePublicKey } from '../crypto/keys';

/** One approver: an id and a public key (Ed25519 or ECDSA P-256; JWK or SPKI PEM). */
export interface ApproverConfig {
  id: string;
  publicKey: unknown;
}

/** The destructive-batch quorum: approvers and how many distinct approvers a batch needs. */
export interface QuorumConfig {
  approvers: readonly ApproverConfig[];
  threshold: number;
}

/** A validated quorum, with parsed keys. */
export interface Quorum {
  approvers: ReadonlyMap<string, PublicKeyInfo>;
  threshold: number;
}

/**
 * Validates the quorum configuration: unique approver ids, readable keys, `1 ≤ threshold ≤ approvers`. Problems are
 * INVALID_CONFIG at `['quorum', …]`. No approvers (or no config) means the quorum is off.
 *
 * @example
 * ```ts
 * const quorum = parseQuorumConfig({ approvers: [{ id: 'alice', publicKey: alicePem }], threshold: 1 });
 * ```
 */
export function parseQuorumConfig(config: QuorumConfig | undefined): Quorum | undefined {
  if (!config || !Array.isArray(config.approvers) || config.approvers.length === 0) return undefined;
  const approvers = new Map<string, PublicKeyInfo>();
  config.approvers.forEach((approver, i) => {
    const path = ['quorum', 'approvers', i];
    if (typeof approver?.id !== 'string' || approver.id.length === 0 || approvers.has(approver.id)) {
      throw new ComputeError('INVALID_CONFIG', 'each approver needs a unique id', {
        details: { path: [...path, 'id'] },
      });
    }
    try {
      approvers.set(approver.id, parsePublicKey(approver.publicKey, [...path, 'publicKey']));
    } catch (cause) {
      throw new ComputeError('INVALID_CONFIG', 'an approver key is not a readable Ed25519 or P-256 public key', {
        details: { path: [...path, 'publicKey'] },
        cause,
      });
    }
  });
  const { threshold } = config;
  if (!Number.isInteger(threshold) || threshold < 1 || threshold > approvers.size) {
    throw new ComputeError('INVALID_CONFIG', `threshold must be an integer from 1 to ${approvers.size}`, {
      details: { path: ['quorum', 'threshold'] },
    });
  }
  return { approvers, threshold };
}
