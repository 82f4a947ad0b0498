import { sql } from 'drizzle-orm';
import { bigserial, index, jsonb, pgTable, text } from 'drizzle-orm/pg-core';
import { tstz, xid8 } from './columns';

/** The events outbox: written in the transaction of the change, read in commit-safe order by `(tx_id, seq)`. */
export const events = pgTable(
  'events',
  {
    seq: bigserial('seq', { mode: 'number' }).primaryKey(),
    txId: xid8('tx_id').notNull().default(sql`pg_current_xact_id()`),
    id: text('id').notNull().unique(),
    tenantId: text('tenant_id').notNull(),
    subject: text('subject').notNull(),
    type: text('type').notNull(),
    data: jsonb('data').notNull(),
    at: tstz('at').notNull(),
  },
  // Per-tenant reads use the first index; root's all-tenant reads and in-process subscribers the second.
  (t) => [
    index('events_tenant_cursor_idx').on(t.tenantId, t.txId, t.seq),
    index('events_cursor_idx').on(t.txId, t.seq),
  ],
);
