import type {
  AttestationPort,
  Clock,
  ComputeModule,
  JoinRole,
  Logger,
  PkiPort,
  QuorumPort,
  SecretBroker,
  SecretRef,
  SqlExecutor,
} from '@better-compute/core';
import { silentLogger, systemClock } from '@better-compute/core/kernel';
import {
  type IssuedCertificate,
  renewAgentCertificate,
  revokeCertificate,
  revokeNodeCertificates,
  type VerifiedCertificate,
  verifyAgentCertificate,
} from './ca/agent-certificates';
import { readCaCertificate } from './ca/authority';
import type { CaAlgorithm } from './ca/x509';
import { parseSecretKey, type SecretKeyInput } from './crypto/secret-key';
import {
  addImageSigner,
  type ImageSignerInput,
  type ImageVerifier,
  imageVerifier,
  revokeImageSigner,
} from './images/image-signers';
import { imageSignersApi } from './images/image-signers-api';
import { pkiMigrationsFolder } from './migrations-folder';
import {
  approveBatch,
  type Batch,
  type BatchApproval,
  type BatchScope,
  batchSigningBytes,
  createBatch,
  rejectBatch,
} from './quorum/batches';
import { quorumCommandPolicy } from './quorum/command-policy';
import { parseQuorumConfig, type QuorumConfig } from './quorum/quorum-config';
import { quorumPort } from './quorum/quorum-port';
import { type VerifyAttestedResultInput, verifyAttestedResult } from './results/verify-attested-result';
import { createSecretBroker, fetchSecretForAgent } from './secrets/secret-broker';
import type { Attestor } from './tokens/attestors';
import { type JoinAgentInput, type JoinAgentResult, joinAgent } from './tokens/join-agent';
import {
  issueJoinToken,
  issueJoinTokenSecret,
  type JoinTokenInput,
  revokeJoinToken,
  stageJoinToken,
  stageJoinTokenSecret,
} from './tokens/join-tokens';

/** Options of {@link pki}. */
export interface PkiOptions {
  /** The 32-byte at-rest key (64 hex digits or base64, or bytes); see `loadOrCreateKeyFile` for the embedded default. */
  key: SecretKeyInput;
  /** Defaults to the kernel's clock once the module is initialised, else the system clock. */
  clock?: Clock;
  /** Defaults to the kernel's logger once the module is initialised, else silent. */
  log?: Logger;
  /** The algorithm of a new CA (default `ecdsa-p256`). An existing CA keeps its own. */
  caAlgorithm?: CaAlgorithm;
  /** Agent certificate lifetime (default 7 days). */
  certificateTtlSeconds?: number;
  /** Replaces the attestor of a role. */
  attestors?: Partial<Record<JoinRole, Attestor>>;
  /** Destructive-batch approvers and threshold; leave out (or no approvers) to turn the quorum off. */
  quorum?: QuorumConfig;
}

/** What {@link pki} returns: the module to register, the two ports, and every operation bound to its configuration. */
export interface Pki {
  module: ComputeModule;
  port(sql?: SqlExecutor, clock?: Clock): PkiPort;
  secrets(sql: SqlExecutor, clock?: Clock): Required<SecretBroker>;
  /** The attested-result verifier port (`betterCompute({ attestation })`): {@link verifyAttestedResult} under its clock. */
  attestation(clock?: Clock): AttestationPort;
  /**
   * The destructive-batch quorum port (`betterCompute({ quorum })`): batches created, read, approved and rejected under
   * this configuration and clock. `enabled()` is false without approvers.
   */
  quorum(clock?: Clock): QuorumPort;
  issueJoinToken(tx: SqlExecutor, input: JoinTokenInput): Promise<{ id: string; token: string }>;
  issueJoinTokenSecret(
    tx: SqlExecutor,
    input: JoinTokenInput & { secretTenantId: string },
  ): Promise<{ id: string; ref: SecretRef }>;
  revokeJoinToken(tx: SqlExecutor, id: string): Promise<void>;
  joinAgent(tx: SqlExecutor, input: JoinAgentInput): Promise<JoinAgentResult>;
  verifyAgentCertificate(sql: SqlExecutor, pem: unknown): Promise<VerifiedCertificate>;
  renewAgentCertificate(
    tx: SqlExecutor,
    input: { certificatePem: string; publicKey?: unknown },
  ): Promise<IssuedCertificate>;
  revokeCertificate(tx: SqlExecutor, serial: string, reason: string): Promise<void>;
  revokeNodeCertificates(tx: SqlExecutor, nodeId: string, reason: string): Promise<number>;
  caCertificate(sql: SqlExecutor): Promise<string | undefined>;
  verifyAttestedResult(sql: SqlExecutor, input: VerifyAttestedResultInput): Promise<{ certificateSerial: string }>;
  fetchSecretForAgent(
    sql: SqlExecutor,
    input: { agentNodeId: string; ref: string; commandId?: string },
  ): Promise<string>;
  imageVerifier: ImageVerifier;
  addImageSigner(tx: SqlExecutor, input: ImageSignerInput): Promise<{ id: string }>;
  revokeImageSigner(tx: SqlExecutor, id: string): Promise<void>;
  createBatch(tx: SqlExecutor, scope: BatchScope): Promise<Batch>;
  approveBatch(
    tx: SqlExecutor,
    batchId: string,
    approval: BatchApproval,
  ): Promise<{ approvals: number; approved: boolean }>;
  rejectBatch(tx: SqlExecutor, batchId: string, rejection: { by: string; reason: string }): Promise<Batch>;
  batchSigningBytes: typeof batchSigningBytes;
}

/**
 * The PKI: CA and agent certificates, join tokens and attestors, node-signed results, image signers, the secret broker
 * and the destructive-batch quorum. Register `module` (its migrations and the quorum's command policy) and hand the
 * ports to the kernel. Bad configuration is INVALID_CONFIG with `details.path`.
 *
 * @example
 * ```ts
 * import { pki } from '@better-compute/pki';
 *
 * const security = pki({ key: process.env.BETTER_COMPUTE_SECRET_KEY!, quorum: { approvers, threshold: 2 } });
 * const compute = await betterCompute({
 *   database,
 *   modules: [security.module, provisionModule({ imageVerifier: security.imageVerifier }), metal()],
 *   pki: security.port(),
 *   secrets: security.secrets(database),
 *   attestation: security.attestation(),
 *   quorum: security.quorum(),
 * });
 * ```
 */
export function pki(options: PkiOptions): Pki {
  const key = parseSecretKey(options.key, ['key']);
  const quorum = parseQuorumConfig(options.quorum);
  const current = { clock: options.clock ?? systemClock, log: options.log ?? silentLogger };
  // The policy reads the clock on every call, so it sees the kernel's once init has run.
  const clock: Clock = { now: () => current.clock.now() };
  const log: Logger = {
    debug: (m, f) => current.log.debug(m, f),
    info: (m, f) => current.log.info(m, f),
    warn: (m, f) => current.log.warn(m, f),
    error: (m, f) => current.log.error(m, f),
  };
  const deps = () => ({
    key,
    clock,
    log,
    caAlgorithm: options.caAlgorithm,
    certificateTtlSeconds: options.certificateTtlSeconds,
    attestors: options.attestors,
  });
  const module: ComputeModule = {
    id: 'pki',
    migrations: { folder: pkiMigrationsFolder },
    commandPolicy: quorumCommandPolicy(quorum, clock),
    // The allowlist `images.register` verifies against, so an operator can trust a signer over the API alone.
    api: { imageSigners: imageSignersApi() },
    init(ctx) {
      if (!options.clock) current.clock = ctx.clock;
      if (!options.log) current.log = ctx.log;
    },
  };
  return {
    module,
    port: (_sql, portClock) => ({
      issueJoinToken: (tx, input) => issueJoinToken(tx, input, { clock: portClock ?? clock }),
      issueJoinTokenSecret: (tx, input) => issueJoinTokenSecret(tx, input, { clock: portClock ?? clock, key }),
      stageJoinToken: (input) => stageJoinToken(input, { clock: portClock ?? clock }),
      stageJoinTokenSecret: (input) => stageJoinTokenSecret(input, { clock: portClock ?? clock, key }),
    }),
    secrets: (sql, secretsClock) => createSecretBroker(sql, { key, clock: secretsClock ?? clock, log }),
    attestation: (attestationClock) => ({
      verify: (sql, input) => verifyAttestedResult(sql, input, { clock: attestationClock ?? clock }),
    }),
    quorum: (quorumClock) => quorumPort(quorum, quorumClock ?? clock),
    issueJoinToken: (tx, input) => issueJoinToken(tx, input, deps()),
    issueJoinTokenSecret: (tx, input) => issueJoinTokenSecret(tx, input, deps()),
    revokeJoinToken: (tx, id) => revokeJoinToken(tx, id, deps()),
    joinAgent: (tx, input) => joinAgent(tx, input, deps()),
    verifyAgentCertificate: (sql, pem) => verifyAgentCertificate(sql, pem, deps()),
    renewAgentCertificate: (tx, input) => renewAgentCertificate(tx, input, deps()),
    revokeCertificate: (tx, serial, reason) => revokeCertificate(tx, serial, reason, deps()),
    revokeNodeCertificates: (tx, nodeId, reason) => revokeNodeCertificates(tx, nodeId, reason, deps()),
    caCertificate: (sql) => readCaCertificate(sql),
    verifyAttestedResult: (sql, input) => verifyAttestedResult(sql, input, deps()),
    fetchSecretForAgent: (sql, input) => fetchSecretForAgent(sql, input, deps()),
    imageVerifier,
    addImageSigner: (tx, input) => addImageSigner(tx, input, deps()),
    revokeImageSigner: (tx, id) => revokeImageSigner(tx, id, deps()),
    createBatch: (tx, scope) => createBatch(tx, scope, deps()),
    approveBatch: (tx, batchId, approval) => approveBatch(tx, batchId, approval, { quorum, clock }),
    rejectBatch: (tx, batchId, rejection) => rejectBatch(tx, batchId, rejection, { clock }),
    batchSigningBytes,
  };
}
