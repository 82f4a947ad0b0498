import { index, jsonb, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';
import { tstz } from './columns';

/** Destructive-command batches: a scope that approvers sign. */
export const pkiBatches = pgTable(
  'pki_batches',
  {
    id: text('id').primaryKey(),
    tenantId: text('tenant_id').notNull(),
    nodeIds: jsonb('node_ids').$type<string[]>().notNull(),
    commandKinds: jsonb('command_kinds').$type<string[]>().notNull(),
    notAfter: tstz('not_after').notNull(),
    createdAt: tstz('created_at').notNull(),
    // A rejected batch is refused for good: who refused it, why and when (null while it is not rejected).
    rejectedAt: tstz('rejected_at'),
    rejectedBy: text('rejected_by'),
    rejectReason: text('reject_reason'),
  },
  (t) => [index('pki_batches_tenant_idx').on(t.tenantId, t.createdAt)],
);

/** One approver's signature over a batch's canonical bytes; one per approver per batch. */
export const pkiBatchApprovals = pgTable(
  'pki_batch_approvals',
  {
    batchId: text('batch_id')
      .notNull()
      .references(() => pkiBatches.id),
    approverId: text('approver_id').notNull(),
    signature: text('signature').notNull(),
    createdAt: tstz('created_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.batchId, t.approverId] })],
);
