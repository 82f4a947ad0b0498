import type { Clock, QuorumBatch, QuorumPort, SqlExecutor } from '@better-compute/core';
import { ComputeError } from '@better-compute/core';
import {
  approveBatch,
  type Batch,
  batchSigningBytes,
  batchStatus,
  createBatch,
  getBatch,
  listBatches,
  rejectBatch,
} from './batches';
import type { Quorum } from './quorum-config';

const decoder = new TextDecoder();

/**
 * A stored batch as the quorum port shows it: its scope, state, valid approvals and the payload approvers sign.
 *
 * @example
 * ```ts
 * const view = await quorumBatchView(sql, batch, quorum, clock);
 * ```
 */
export async function quorumBatchView(
  sql: SqlExecutor,
  batch: Batch,
  quorum: Quorum | undefined,
  clock: Clock,
): Promise<QuorumBatch> {
  const status = await batchStatus(sql, batch, quorum, clock);
  return {
    id: batch.id,
    tenantId: batch.tenantId,
    nodeIds: [...batch.nodeIds],
    commandKinds: [...batch.commandKinds],
    notAfter: batch.notAfter,
    createdAt: batch.createdAt,
    ...status,
    rejection: batch.rejection,
    signingPayload: decoder.decode(batchSigningBytes(batch)),
  };
}

/**
 * The quorum port (`ctx.quorum`) over pki's batches under one configuration: `enabled()` says whether approvers are
 * configured; the rest are {@link createBatch}, {@link getBatch}, {@link listBatches}, {@link approveBatch} and
 * {@link rejectBatch}, each answering with the batch as it stands after.
 *
 * @example
 * ```ts
 * const compute = await betterCompute({ modules, quorum: quorumPort(parseQuorumConfig(config), systemClock) });
 * ```
 */
export function quorumPort(quorum: Quorum | undefined, clock: Clock): QuorumPort {
  const view = (sql: SqlExecutor, batch: Batch) => quorumBatchView(sql, batch, quorum, clock);
  const reread = async (sql: SqlExecutor, batchId: string) => {
    const batch = await getBatch(sql, batchId);
    if (!batch) throw new ComputeError('NOT_FOUND', 'no such batch', { details: { path: ['batchId'] } });
    return view(sql, batch);
  };
  return {
    enabled: () => quorum !== undefined,
    createBatch: async (tx, scope) => view(tx, await createBatch(tx, scope, { clock })),
    getBatch: async (sql, batchId) => {
      const batch = await getBatch(sql, batchId);
      return batch ? view(sql, batch) : undefined;
    },
    listBatches: async (sql, input) => {
      const batches = await listBatches(sql, input);
      const views: QuorumBatch[] = [];
      for (const batch of batches) views.push(await view(sql, batch));
      return views;
    },
    approve: async (tx, batchId, approval) => {
      await approveBatch(tx, batchId, approval, { quorum, clock });
      return reread(tx, batchId);
    },
    reject: async (tx, batchId, rejection) => view(tx, await rejectBatch(tx, batchId, rejection, { clock })),
  };
}
