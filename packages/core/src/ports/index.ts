export type { AttestationPort, AttestedResultInput } from './attestation';
export type { ImageSource, ImageSourceContext, ResolvedImageSource } from './images';
export type { HardwareExpectation, IssueJoinTokenInput, JoinRole, PkiPort } from './pki';
export type {
  ListQuorumBatchesInput,
  QuorumBatch,
  QuorumBatchScope,
  QuorumBatchState,
  QuorumPort,
} from './quorum';
export type { SecretBroker, SecretRef } from './secrets';
