import {
  type ApiCallContext,
  ComputeError,
  defineApiGroup,
  defineApiMethod,
  type QuorumBatch,
  resolveTenantResource,
  resourceNotFound,
  type SqlExecutor,
} from '@better-compute/core';
import { storableTextProblem } from '@better-compute/core/checks';
import * as v from 'valibot';
import { requireQuorum } from '../machines/quorum';
import { METAL_WORK_KIND } from '../machines/reconciler';
import { METAL_DEFAULT_LIMIT, METAL_MAX_LIMIT } from './cursor';
import { checkStorable, textSchema } from './inputs';

/** A batch as the `batches` group returns it (dates as ISO-8601 strings). */
export interface BatchView {
  id: string;
  tenantId: string;
  nodeIds: string[];
  commandKinds: string[];
  notAfter: string;
  createdAt: string;
  state: QuorumBatch['state'];
  approvals: number;
  threshold: number;
  approvedBy: string[];
  rejection: { by: string; reason: string; at: string } | null;
  /** The canonical JSON an approver signs (its UTF-8 bytes), as `batchSigningBytes` makes it. */
  signingPayload: string;
}

function toView(batch: QuorumBatch): BatchView {
  return {
    id: batch.id,
    tenantId: batch.tenantId,
    nodeIds: batch.nodeIds,
    commandKinds: batch.commandKinds,
    notAfter: batch.notAfter.toISOString(),
    createdAt: batch.createdAt.toISOString(),
    state: batch.state,
    approvals: batch.approvals,
    threshold: batch.threshold,
    approvedBy: batch.approvedBy,
    rejection: batch.rejection
      ? { by: batch.rejection.by, reason: batch.rejection.reason, at: batch.rejection.at.toISOString() }
      : null,
    signingPayload: batch.signingPayload,
  };
}

const LISTING = 'metal.batches';

function invalidCursor(): ComputeError {
  return new ComputeError('INVALID_INPUT', 'cursor is not a cursor batches.list returned', {
    details: { path: ['cursor'], reason: 'invalid-cursor' },
  });
}

function encodeCursor(batch: QuorumBatch): string {
  return Buffer.from(JSON.stringify({ l: LISTING, t: batch.createdAt.toISOString(), i: batch.id }), 'utf8').toString(
    'base64url',
  );
}

function decodeCursor(cursor: string): { createdAt: Date; id: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalidCursor();
  }
  if (typeof parsed !== 'object' || parsed === null) throw invalidCursor();
  const { l, t, i } = parsed as Record<string, unknown>;
  if (l !== LISTING || typeof t !== 'string' || typeof i !== 'string') throw invalidCursor();
  const createdAt = new Date(t);
  if (Number.isNaN(createdAt.getTime()) || createdAt.toISOString() !== t) throw invalidCursor();
  if (i.length === 0 || i.length > 512 || storableTextProblem(i) !== undefined) throw invalidCursor();
  return { createdAt, id: i };
}

const batchInput = { tenantId: textSchema('tenantId'), batchId: textSchema('batchId') };
const onTenant = (input: { tenantId: string }, ctx: { sql: SqlExecutor }) =>
  resolveTenantResource(ctx.sql, input.tenantId);

/** The tenant's batch, or NOT_FOUND (an unknown batch and another tenant's read the same). */
async function tenantBatch(sql: SqlExecutor, ctx: ApiCallContext, tenantId: string, batchId: string) {
  checkStorable(batchId, ['batchId']);
  const batch = await ctx.quorum?.getBatch(sql, batchId);
  if (!batch || batch.tenantId !== tenantId) throw resourceNotFound('compute-batch', ['batchId']);
  return batch;
}

/** Wakes the metal reconciler of every node of a batch, in the transaction that approved or rejected it. */
async function wakeNodes(tx: SqlExecutor, ctx: ApiCallContext, batch: QuorumBatch): Promise<void> {
  for (const nodeId of batch.nodeIds) await ctx.work.enqueue(tx, { kind: METAL_WORK_KIND, key: nodeId });
}

/**
 * The `batches` API group: the destructive-command batches metal creates for its workflows when approvers are
 * configured (see the metal README, "The quorum"), decided on the tenant. `list` and `get` need
 * `compute:metal:read`; `approve` and `reject` need `compute:metal:manage`, and `approve` also an approver's signature
 * over the batch's `signingPayload` (the quorum verifies it: a forged one, or one made for another batch, is
 * PERMISSION_DENIED `signature-invalid`). Approving or rejecting wakes the batch's machines: an approved batch's
 * workflow proceeds, a rejected one's machine fails in its phase (`BATCH_REJECTED`). Another tenant's batch is
 * NOT_FOUND; without the quorum port `approve` and `reject` are INVALID_CONFIG, `list` is empty and `get` NOT_FOUND.
 *
 * @example
 * ```ts
 * const batch = await api.batches.get(token, { tenantId: 'root', batchId });
 * const signature = signToBase64Url(alicePem, new TextEncoder().encode(batch.signingPayload));
 * await api.batches.approve(token, { tenantId: 'root', batchId, approverId: 'alice', signature });
 * ```
 */
export function batchesApi() {
  const list = defineApiMethod({
    input: v.object({
      tenantId: textSchema('tenantId'),
      nodeId: v.optional(textSchema('nodeId')),
      limit: v.optional(
        v.pipe(
          v.number('limit must be a number'),
          v.integer('limit must be a whole number'),
          v.minValue(1, 'limit must be at least 1'),
          v.maxValue(METAL_MAX_LIMIT, `limit must be at most ${METAL_MAX_LIMIT}`),
        ),
        METAL_DEFAULT_LIMIT,
      ),
      cursor: v.optional(v.pipe(v.string('cursor must be a string'), v.minLength(1), v.maxLength(2048))),
    }),
    permission: 'compute:metal:read',
    resource: onTenant,
    description:
      'The tenant’s destructive-command batches, newest first, optionally those covering one node; limit at most 100 ' +
      '(default 50); nextCursor fetches the next page. Each shows its state (pending, approved, rejected, expired), ' +
      'approvals of threshold and the payload approvers sign.',
    handler: async (input, ctx): Promise<{ items: BatchView[]; nextCursor: string | null }> => {
      if (input.nodeId !== undefined) checkStorable(input.nodeId, ['nodeId']);
      const after = input.cursor === undefined ? undefined : decodeCursor(input.cursor);
      if (!ctx.quorum) return { items: [], nextCursor: null };
      const rows = await ctx.quorum.listBatches(ctx.sql, {
        tenantId: input.tenantId,
        limit: input.limit + 1,
        ...(input.nodeId === undefined ? {} : { nodeId: input.nodeId }),
        ...(after ? { after } : {}),
      });
      const page = rows.slice(0, input.limit);
      const last = page[page.length - 1];
      return {
        items: page.map(toView),
        nextCursor: rows.length > input.limit && last ? encodeCursor(last) : null,
      };
    },
  });

  const get = defineApiMethod({
    input: v.object(batchInput),
    permission: 'compute:metal:read',
    resource: onTenant,
    description:
      'A batch: its scope, state, approvals of threshold, who approved or rejected it, and its signing payload.',
    handler: async (input, ctx): Promise<BatchView> =>
      toView(await tenantBatch(ctx.sql, ctx, input.tenantId, input.batchId)),
  });

  const approve = defineApiMethod({
    input: v.object({
      ...batchInput,
      approverId: textSchema('approverId', 256),
      signature: textSchema('signature', 1024),
    }),
    permission: 'compute:metal:manage',
    resource: onTenant,
    description:
      'Adds an approver’s signature (base64url, over the UTF-8 bytes of the batch’s signingPayload). Once a ' +
      'threshold of configured approvers signed, the batch’s machines proceed by themselves. A signature that does ' +
      'not verify (forged, or made for another batch) is PERMISSION_DENIED; a second one by the same approver ' +
      'CONFLICT; an expired or rejected batch INVALID_STATE.',
    handler: async (input, ctx): Promise<BatchView> => {
      const quorum = requireQuorum(ctx);
      checkStorable(input.approverId, ['approverId']);
      return ctx.sql.transaction(async (tx) => {
        await tenantBatch(tx, ctx, input.tenantId, input.batchId);
        const batch = await quorum.approve(tx, input.batchId, {
          approverId: input.approverId,
          signature: input.signature,
        });
        if (batch.state === 'approved') await wakeNodes(tx, ctx, batch);
        return toView(batch);
      });
    },
  });

  const reject = defineApiMethod({
    input: v.object({
      ...batchInput,
      reason: v.optional(textSchema('reason', 1024)),
    }),
    permission: 'compute:metal:manage',
    resource: onTenant,
    description:
      'Rejects a batch for good (no key needed: refusing only stops work): no approval counts after it, and each of ' +
      'its machines fails in the phase it waited in, with last error BATCH_REJECTED; recover runs that phase again ' +
      'under a fresh batch. A batch already rejected is INVALID_STATE.',
    handler: async (input, ctx): Promise<BatchView> => {
      const quorum = requireQuorum(ctx);
      const reason = input.reason ?? 'rejected by batches.reject';
      checkStorable(reason, ['reason']);
      return ctx.sql.transaction(async (tx) => {
        await tenantBatch(tx, ctx, input.tenantId, input.batchId);
        const batch = await quorum.reject(tx, input.batchId, { by: ctx.principal.credentialId, reason });
        await wakeNodes(tx, ctx, batch);
        return toView(batch);
      });
    },
  });

  return defineApiGroup('batches', { list, get, approve, reject });
}

/** The `batches` group {@link batchesApi} returns, for `ApiClient<{ batches: BatchesApi }>`. */
export type BatchesApi = ReturnType<typeof batchesApi>;
