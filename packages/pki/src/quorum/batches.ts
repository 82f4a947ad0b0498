import { type Clock, ComputeError, newId, type SqlExecutor } from '@better-compute/core';
import { canonicalBytes } from '../crypto/canonical-json';
import { fromBase64 } from '../crypto/encoding';
import { verifyBytes } from '../crypto/signatures';
import { requireObject, requireString } from '../tokens/validate';
import type { Quorum } from './quorum-config';

/** A batch's scope: the tenant, the nodes and command kinds it covers, and until when. */
export interface BatchScope {
  tenantId: string;
  nodeIds: readonly string[];
  commandKinds: readonly string[];
  notAfter: Date;
}

/** A stored batch (`bat_…`); node ids and kinds sorted and unique. */
export interface Batch {
  id: string;
  tenantId: string;
  nodeIds: string[];
  commandKinds: string[];
  notAfter: Date;
  createdAt: Date;
  /** Who refused the batch, why and when; null while it is not rejected. */
  rejection: { by: string; reason: string; at: Date } | null;
}

/** One approval as given: who, and their base64url signature over {@link batchSigningBytes}. */
export interface BatchApproval {
  approverId: string;
  signature: string;
}

function sortedUnique(values: unknown, path: string[]): string[] {
  if (!Array.isArray(values) || values.length === 0 || values.length > 10_000) {
    throw new ComputeError('INVALID_INPUT', `${path.join('.')} must list 1 to 10000 entries`, { details: { path } });
  }
  return [...new Set(values.map((value, i) => requireString(value, [...path, i])))].sort();
}

/**
 * The bytes approvers sign: the canonical JSON of the batch's id, tenant, sorted node ids and kinds, `notAfter` as an
 * ISO-8601 string and `type: 'better-compute.batch.v1'`. The id is in it, so a signature approves one batch only.
 *
 * @example
 * ```ts
 * const signature = signToBase64Url(approverKeyPem, batchSigningBytes(batch));
 * ```
 */
export function batchSigningBytes(
  batch: Pick<Batch, 'id' | 'tenantId' | 'nodeIds' | 'commandKinds' | 'notAfter'>,
): Uint8Array {
  return canonicalBytes({
    commandKinds: [...batch.commandKinds].sort(),
    id: batch.id,
    nodeIds: [...batch.nodeIds].sort(),
    notAfter: batch.notAfter.toISOString(),
    tenantId: batch.tenantId,
    type: 'better-compute.batch.v1',
  });
}

interface BatchRow {
  id: string;
  tenant_id: string;
  node_ids: string[];
  command_kinds: string[];
  not_after: Date;
  created_at: Date;
  rejected_at: Date | null;
  rejected_by: string | null;
  reject_reason: string | null;
}

const asDate = (value: Date | string): Date => (value instanceof Date ? value : new Date(value));

function toBatch(row: BatchRow): Batch {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    nodeIds: row.node_ids,
    commandKinds: row.command_kinds,
    notAfter: asDate(row.not_after),
    createdAt: asDate(row.created_at),
    rejection:
      row.rejected_at === null
        ? null
        : { by: row.rejected_by ?? '', reason: row.reject_reason ?? '', at: asDate(row.rejected_at) },
  };
}

/**
 * Creates a batch over a scope. `notAfter` must be in the future; bad input is INVALID_INPUT with `details.path`.
 *
 * @example
 * ```ts
 * const batch = await createBatch(tx, { tenantId: 'root', nodeIds, commandKinds: ['deploy.wipe'], notAfter }, { clock });
 * ```
 */
export async function createBatch(tx: SqlExecutor, scope: BatchScope, deps: { clock: Clock }): Promise<Batch> {
  const object = requireObject(scope, []);
  const tenantId = requireString(object.tenantId, ['tenantId']);
  const nodeIds = sortedUnique(object.nodeIds, ['nodeIds']);
  const commandKinds = sortedUnique(object.commandKinds, ['commandKinds']);
  const notAfter = object.notAfter;
  const now = deps.clock.now();
  if (!(notAfter instanceof Date) || Number.isNaN(notAfter.getTime()) || notAfter <= now) {
    throw new ComputeError('INVALID_INPUT', 'notAfter must be a Date in the future', {
      details: { path: ['notAfter'] },
    });
  }
  const id = newId('bat');
  await tx.query(
    `INSERT INTO pki_batches (id, tenant_id, node_ids, command_kinds, not_after, created_at)
     VALUES ($1, $2, $3::jsonb, $4::jsonb, $5, $6)`,
    [id, tenantId, JSON.stringify(nodeIds), JSON.stringify(commandKinds), notAfter, now],
  );
  return { id, tenantId, nodeIds, commandKinds, notAfter, createdAt: now, rejection: null };
}

/**
 * Reads a batch, or undefined.
 *
 * @example
 * ```ts
 * const batch = await getBatch(sql, 'bat_01k…');
 * ```
 */
export async function getBatch(sql: SqlExecutor, id: string): Promise<Batch | undefined> {
  const { rows } = await sql.query<BatchRow>('SELECT * FROM pki_batches WHERE id = $1', [id]);
  return rows[0] ? toBatch(rows[0]) : undefined;
}

function batchRejected(): ComputeError {
  return new ComputeError('INVALID_STATE', 'the batch was rejected', {
    details: { path: ['batchId'], reason: 'batch-rejected' },
  });
}

function quorumOff(): never {
  throw new ComputeError('INVALID_CONFIG', 'no approvers are configured', { details: { path: ['quorum'] } });
}

/**
 * Records an approval after verifying its signature now. An unknown approver or a signature that does not verify
 * over this batch's bytes (including one made for another batch) is PERMISSION_DENIED (`approver-unknown`,
 * `signature-invalid`); a second approval by the same approver is CONFLICT (`approval-duplicate`); an expired batch
 * is INVALID_STATE (`batch-expired`); an unknown batch NOT_FOUND.
 *
 * @example
 * ```ts
 * await approveBatch(tx, batch.id, { approverId: 'alice', signature }, { quorum, clock });
 * ```
 */
export async function approveBatch(
  tx: SqlExecutor,
  batchId: string,
  approval: BatchApproval,
  deps: { quorum: Quorum | undefined; clock: Clock },
): Promise<{ approvals: number; approved: boolean }> {
  const quorum = deps.quorum ?? quorumOff();
  const object = requireObject(approval, []);
  const approverId = requireString(object.approverId, ['approverId']);
  const signature = fromBase64(object.signature, ['signature']);
  const { rows } = await tx.query<BatchRow>('SELECT * FROM pki_batches WHERE id = $1 FOR UPDATE', [batchId]);
  if (!rows[0]) throw new ComputeError('NOT_FOUND', 'no such batch', { details: { path: ['batchId'] } });
  const batch = toBatch(rows[0]);
  const now = deps.clock.now();
  if (batch.rejection) throw batchRejected();
  if (now >= batch.notAfter) {
    throw new ComputeError('INVALID_STATE', 'the batch has expired', {
      details: { path: ['batchId'], reason: 'batch-expired' },
    });
  }
  const key = quorum.approvers.get(approverId);
  if (!key) {
    throw new ComputeError('PERMISSION_DENIED', 'not a configured approver', {
      details: { path: ['approverId'], reason: 'approver-unknown' },
    });
  }
  if (!verifyBytes(key, batchSigningBytes(batch), signature)) {
    throw new ComputeError('PERMISSION_DENIED', 'the signature does not approve this batch', {
      details: { path: ['signature'], reason: 'signature-invalid' },
    });
  }
  const inserted = await tx.query(
    `INSERT INTO pki_batch_approvals (batch_id, approver_id, signature, created_at) VALUES ($1, $2, $3, $4)
     ON CONFLICT (batch_id, approver_id) DO NOTHING`,
    [batchId, approverId, object.signature, now],
  );
  if (inserted.rowCount === 0) {
    throw new ComputeError('CONFLICT', 'this approver already approved the batch', {
      details: { path: ['approverId'], reason: 'approval-duplicate' },
    });
  }
  const approvals = await countValidApprovals(tx, batch, quorum);
  return { approvals, approved: approvals >= quorum.threshold };
}

/**
 * How many distinct configured approvers have a stored signature that verifies over the batch's bytes now (an
 * approver removed from the configuration no longer counts).
 *
 * @example
 * ```ts
 * const n = await countValidApprovals(sql, batch, quorum);
 * ```
 */
export async function countValidApprovals(sql: SqlExecutor, batch: Batch, quorum: Quorum): Promise<number> {
  return (await validApprovers(sql, batch, quorum)).length;
}

/** The configured approvers whose stored signatures over the batch verify now, sorted. */
async function validApprovers(sql: SqlExecutor, batch: Batch, quorum: Quorum): Promise<string[]> {
  const { rows } = await sql.query<{ approver_id: string; signature: string }>(
    'SELECT approver_id, signature FROM pki_batch_approvals WHERE batch_id = $1',
    [batch.id],
  );
  const bytes = batchSigningBytes(batch);
  const valid: string[] = [];
  for (const row of rows) {
    const key = quorum.approvers.get(row.approver_id);
    if (key && verifyBytes(key, bytes, fromBase64(row.signature, ['signature']))) valid.push(row.approver_id);
  }
  return valid.sort();
}

/** Where a batch stands (see {@link batchStatus}). */
export type BatchState = 'pending' | 'approved' | 'rejected' | 'expired';

/**
 * Where a batch stands now: `rejected` once refused, else `approved` with `threshold` valid signatures (an approved
 * batch stays approved until it expires), else `expired` past `notAfter`, else `pending`; with the approvers whose
 * signatures verify now.
 *
 * @example
 * ```ts
 * const { state, approvals } = await batchStatus(sql, batch, quorum, clock);
 * ```
 */
export async function batchStatus(
  sql: SqlExecutor,
  batch: Batch,
  quorum: Quorum | undefined,
  clock: Clock,
): Promise<{ state: BatchState; approvals: number; threshold: number; approvedBy: string[] }> {
  const approvedBy = quorum ? await validApprovers(sql, batch, quorum) : [];
  const threshold = quorum?.threshold ?? 0;
  const expired = clock.now() >= batch.notAfter;
  const state: BatchState = batch.rejection
    ? 'rejected'
    : expired
      ? 'expired'
      : quorum && approvedBy.length >= threshold
        ? 'approved'
        : 'pending';
  return { state, approvals: approvedBy.length, threshold, approvedBy };
}

/**
 * Rejects a batch for good: later approvals are INVALID_STATE (`batch-rejected`), and the quorum's policy refuses
 * every command under it. Refusing needs no approver key (it only ever stops work); the caller records who refused.
 * A batch already rejected is INVALID_STATE (`batch-rejected`), an unknown one NOT_FOUND; `by` and `reason` are 1 to
 * 1024 characters.
 *
 * @example
 * ```ts
 * await rejectBatch(tx, batch.id, { by: 'usr_alice', reason: 'not during the freeze' }, { clock });
 * ```
 */
export async function rejectBatch(
  tx: SqlExecutor,
  batchId: string,
  rejection: { by: string; reason: string },
  deps: { clock: Clock },
): Promise<Batch> {
  const object = requireObject(rejection, []);
  const by = requireString(object.by, ['by']);
  const reason = requireString(object.reason, ['reason']);
  for (const [value, path] of [
    [by, 'by'],
    [reason, 'reason'],
  ] as const) {
    if (value.length > 1024) {
      throw new ComputeError('INVALID_INPUT', `${path} must be at most 1024 characters`, { details: { path: [path] } });
    }
  }
  const { rows } = await tx.query<BatchRow>('SELECT * FROM pki_batches WHERE id = $1 FOR UPDATE', [batchId]);
  if (!rows[0]) throw new ComputeError('NOT_FOUND', 'no such batch', { details: { path: ['batchId'] } });
  if (rows[0].rejected_at !== null) throw batchRejected();
  const now = deps.clock.now();
  await tx.query('UPDATE pki_batches SET rejected_at = $2, rejected_by = $3, reject_reason = $4 WHERE id = $1', [
    batchId,
    now,
    by,
    reason,
  ]);
  return { ...toBatch(rows[0]), rejection: { by, reason, at: now } };
}

/**
 * A tenant's batches, newest first, optionally only those covering `nodeId`, after the `(createdAt, id)` of the last
 * one of the previous page.
 *
 * @example
 * ```ts
 * const page = await listBatches(sql, { tenantId: 'root', nodeId, limit: 50 });
 * ```
 */
export async function listBatches(
  sql: SqlExecutor,
  input: { tenantId: string; nodeId?: string; limit: number; after?: { createdAt: Date; id: string } },
): Promise<Batch[]> {
  const params: unknown[] = [input.tenantId];
  const where = ['tenant_id = $1'];
  if (input.nodeId !== undefined) {
    params.push(JSON.stringify([input.nodeId]));
    where.push(`node_ids @> $${params.length}::jsonb`);
  }
  if (input.after) {
    params.push(input.after.createdAt, input.after.id);
    const at = `$${params.length - 1}`;
    const id = `$${params.length}`;
    where.push(`(created_at < ${at} OR (created_at = ${at} AND id COLLATE "C" < ${id}::text COLLATE "C"))`);
  }
  params.push(input.limit);
  const { rows } = await sql.query<BatchRow>(
    `SELECT * FROM pki_batches WHERE ${where.join(' AND ')}
     ORDER BY created_at DESC, id COLLATE "C" DESC LIMIT $${params.length}`,
    params,
  );
  return rows.map(toBatch);
}
