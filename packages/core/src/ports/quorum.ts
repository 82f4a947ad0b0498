import type { SqlExecutor } from '../sql/executor';

/** Where a batch stands: waiting for signatures, signed by a threshold of approvers, refused, or past its expiry. */
export type QuorumBatchState = 'pending' | 'approved' | 'rejected' | 'expired';

/** What a batch covers: the tenant, the nodes and destructive command kinds, and until when. */
export interface QuorumBatchScope {
  tenantId: string;
  nodeIds: readonly string[];
  commandKinds: readonly string[];
  notAfter: Date;
}

/**
 * A destructive-command batch as the quorum port shows it: its scope, where it stands, how many configured approvers
 * signed it (only signatures that verify now count) and who refused it.
 */
export interface QuorumBatch {
  id: string;
  tenantId: string;
  nodeIds: string[];
  commandKinds: string[];
  notAfter: Date;
  createdAt: Date;
  state: QuorumBatchState;
  approvals: number;
  threshold: number;
  /** The approvers whose stored signatures verify now. */
  approvedBy: string[];
  rejection: { by: string; reason: string; at: Date } | null;
  /** The canonical JSON whose UTF-8 bytes an approver signs. */
  signingPayload: string;
}

/** What listing batches takes: the tenant's, newest first, optionally those covering one node, after a cursor. */
export interface ListQuorumBatchesInput {
  tenantId: string;
  nodeId?: string;
  limit: number;
  /** The `createdAt` and `id` of the last batch of the previous page. */
  after?: { createdAt: Date; id: string };
}

/**
 * The destructive-batch quorum port (`ctx.quorum`): what a module that starts destructive work needs of the quorum.
 * pki provides it (`pki(...).quorum()`); without it (or without approvers) nothing needs a batch. Refusals are the
 * quorum's own: a signature that does not approve this batch is PERMISSION_DENIED (`signature-invalid`,
 * `approver-unknown`), a second approval CONFLICT (`approval-duplicate`), an expired or rejected batch INVALID_STATE
 * (`batch-expired`, `batch-rejected`), an unknown one NOT_FOUND.
 *
 * @example
 * ```ts
 * if (ctx.quorum?.enabled()) {
 *   const batch = await ctx.quorum.createBatch(tx, { tenantId, nodeIds: [nodeId], commandKinds: ['disk.wipe'], notAfter });
 * }
 * ```
 */
export interface QuorumPort {
  /** Whether approvers are configured, so destructive commands need an approved batch. */
  enabled(): boolean;
  createBatch(tx: SqlExecutor, scope: QuorumBatchScope): Promise<QuorumBatch>;
  getBatch(sql: SqlExecutor, batchId: string): Promise<QuorumBatch | undefined>;
  listBatches(sql: SqlExecutor, input: ListQuorumBatchesInput): Promise<QuorumBatch[]>;
  /** Records an approver's signature (base64url) over the batch's signing payload, verified now. */
  approve(tx: SqlExecutor, batchId: string, approval: { approverId: string; signature: string }): Promise<QuorumBatch>;
  /** Refuses a pending batch for good: no approval counts after it, and no command runs under it. */
  reject(tx: SqlExecutor, batchId: string, rejection: { by: string; reason: string }): Promise<QuorumBatch>;
}
