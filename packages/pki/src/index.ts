export {
  type AgentIdentity,
  agentUri,
  DEFAULT_CERTIFICATE_TTL_SECONDS,
  type IssuedCertificate,
  issueAgentCertificate,
  parseCertificatePem,
  renewAgentCertificate,
  revokeCertificate,
  revokeNodeCertificates,
  type VerifiedCertificate,
  verifyAgentCertificate,
} from './ca/agent-certificates';
export { type CertificateAuthority, ensureCertificateAuthority, readCaCertificate } from './ca/authority';
export {
  type IssuedServerCertificate,
  issueServerCertificate,
  type ServerCertificateInput,
} from './ca/server-certificate';
export type { CaAlgorithm } from './ca/x509';
export { open, seal } from './crypto/aead';
export { canonicalBytes, canonicalJson } from './crypto/canonical-json';
export { fromBase64, toBase64Url } from './crypto/encoding';
export {
  type PrivateKeyInfo,
  type PrivateKeyInput,
  type PublicKeyInfo,
  type PublicKeyInput,
  parsePrivateKey,
  parsePublicKey,
  type SignatureAlgorithm,
} from './crypto/keys';
export { loadOrCreateKeyFile, parseSecretKey, type SecretKeyInput } from './crypto/secret-key';
export {
  generateSigningKeyPair,
  type SigningKeyPair,
  signBytes,
  signToBase64Url,
  verifyBase64,
  verifyBytes,
} from './crypto/signatures';
export {
  addImageSigner,
  type ImageSignerInput,
  type ImageVerificationInput,
  type ImageVerifier,
  imageSigningBytes,
  imageVerifier,
  revokeImageSigner,
} from './images/image-signers';
export {
  type ApiImageSigner,
  COMPUTE_IMAGE_SIGNER,
  type ImageSignersApi,
  type ImageSignersPage,
  imageSignersApi,
} from './images/image-signers-api';
export { pkiMigrationsFolder } from './migrations-folder';
export { type Pki, type PkiOptions, pki } from './pki';
export {
  approveBatch,
  type Batch,
  type BatchApproval,
  type BatchScope,
  type BatchState,
  batchSigningBytes,
  batchStatus,
  countValidApprovals,
  createBatch,
  getBatch,
  listBatches,
  rejectBatch,
} from './quorum/batches';
export { quorumCommandPolicy } from './quorum/command-policy';
export { type ApproverConfig, parseQuorumConfig, type Quorum, type QuorumConfig } from './quorum/quorum-config';
export { quorumBatchView, quorumPort } from './quorum/quorum-port';
export {
  type AttestedResult,
  type VerifyAttestedResultInput,
  verifyAttestedResult,
} from './results/verify-attested-result';
export {
  createSecretBroker,
  fetchSecretForAgent,
  MAX_SECRET_BYTES,
  type SecretBrokerDeps,
} from './secrets/secret-broker';
export {
  type AttestedNode,
  type Attestor,
  type AttestorInput,
  discoveryAttestor,
  nodeAttestor,
  type ProvisionedLookup,
  provisionedTargetResolver,
  siteAttestor,
  workflowStepsLookup,
} from './tokens/attestors';
export { CLAIM_NAMES, type ClaimName, type HardwareClaims } from './tokens/claims';
export { JOIN_ANSWER_AGAIN_MS } from './tokens/join-again';
export {
  defaultAttestors,
  type JoinAgentInput,
  type JoinAgentResult,
  type JoinDeps,
  joinAgent,
} from './tokens/join-agent';
export {
  issueJoinToken,
  issueJoinTokenSecret,
  JOIN_ROLES,
  type JoinTokenInput,
  type JoinTokenRow,
  lookupJoinToken,
  MAX_TOKEN_TTL_SECONDS,
  revokeJoinToken,
} from './tokens/join-tokens';
