import { pgTable, text } from 'drizzle-orm/pg-core';
import { tstz } from './columns';

/**
 * What `userdata.render` made for one step (by its idempotency key), so a re-run after a crash finds the token and the
 * stored document instead of minting and storing them again.
 */
export const userDataRenders = pgTable('userdata_renders', {
  stepKey: text('step_key').primaryKey(),
  workflowId: text('workflow_id').notNull(),
  tenantId: text('tenant_id').notNull(),
  kind: text('kind').notNull(),
  userDataRef: text('user_data_ref').notNull(),
  joinTokenId: text('join_token_id').notNull(),
  createdAt: tstz('created_at').notNull(),
});
