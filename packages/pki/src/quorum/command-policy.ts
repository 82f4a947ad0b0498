import {
  type Clock,
  type CommandKindDefinition,
  type CommandPolicy,
  ComputeError,
  type ErrorReason,
} from '@better-compute/core';
import { countValidApprovals, getBatch } from './batches';
import type { Quorum } from './quorum-config';

function outOfScope(reason: ErrorReason<'INVALID_INPUT'>, message: string, path: string[]): ComputeError {
  return new ComputeError('INVALID_INPUT', message, { details: { path, reason } });
}

/**
 * The destructive-batch quorum as a command policy. Without approvers it allows everything. With them, a destructive
 * command needs a batch (else INVALID_STATE `batch-required`) that exists, is in the command's tenant, names its node
 * and kind and has not expired (else INVALID_INPUT `batch-unknown`, `batch-tenant-out-of-scope`,
 * `batch-node-out-of-scope`, `batch-kind-out-of-scope`, `batch-expired`), was not rejected (else INVALID_STATE
 * `batch-rejected`), and has at least `threshold` valid
 * signatures (else INVALID_STATE `batch-unapproved`). Commands that are not destructive pass; its `appliesTo` says so,
 * so they skip it.
 *
 * @example
 * ```ts
 * const module = { id: 'pki', commandPolicy: quorumCommandPolicy(quorum, systemClock) } satisfies ComputeModule;
 * ```
 */
export function quorumCommandPolicy(quorum: Quorum | undefined, clock: Clock): CommandPolicy {
  const check: CommandPolicy = async (tx, command, kind) => {
    if (!quorum || !kind.destructive) return;
    if (!command.batchId) {
      throw new ComputeError('INVALID_STATE', `${command.kind} is destructive and needs an approved batch`, {
        details: { path: ['batchId'], reason: 'batch-required' },
      });
    }
    const batch = await getBatch(tx, command.batchId);
    if (!batch) throw outOfScope('batch-unknown', 'no such batch', ['batchId']);
    if (batch.tenantId !== command.tenantId)
      throw outOfScope('batch-tenant-out-of-scope', "the batch is another tenant's", ['batchId']);
    if (!batch.nodeIds.includes(command.nodeId))
      throw outOfScope('batch-node-out-of-scope', 'the node is outside the batch', ['nodeId']);
    if (!batch.commandKinds.includes(command.kind))
      throw outOfScope('batch-kind-out-of-scope', 'the kind is outside the batch', ['kind']);
    if (batch.rejection) {
      throw new ComputeError('INVALID_STATE', 'the batch was rejected', {
        details: { path: ['batchId'], reason: 'batch-rejected' },
      });
    }
    if (clock.now() >= batch.notAfter) throw outOfScope('batch-expired', 'the batch has expired', ['batchId']);
    const approvals = await countValidApprovals(tx, batch, quorum);
    if (approvals < quorum.threshold) {
      throw new ComputeError('INVALID_STATE', `the batch has ${approvals} of ${quorum.threshold} approvals`, {
        details: { path: ['batchId'], reason: 'batch-unapproved', approvals, threshold: quorum.threshold },
      });
    }
  };
  // Only destructive kinds (and only with approvers) are looked at: the others skip it, and the engine may write
  // them with the transition that sends them.
  return Object.assign(check, {
    appliesTo: (kind: CommandKindDefinition) => quorum !== undefined && kind.destructive === true,
  });
}
