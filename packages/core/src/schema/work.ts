import { bigint, index, integer, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';
import { tstz } from './columns';

/** The work queue: one row per (kind, key), due at `not_before`, owned by the worker holding its shard. */
export const workItems = pgTable(
  'work_items',
  {
    kind: text('kind').notNull(),
    key: text('key').notNull(),
    shard: integer('shard').notNull(),
    notBefore: tstz('not_before').notNull(),
    // Bumped by every enqueue, so finishing an item never deletes a wake-up that arrived while it ran.
    seq: bigint('seq', { mode: 'number' }).notNull().default(0),
    attempts: integer('attempts').notNull().default(0),
    lastError: text('last_error'),
    claimedBy: text('claimed_by'),
    createdAt: tstz('created_at').notNull(),
    updatedAt: tstz('updated_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.kind, t.key] }), index('work_items_due_idx').on(t.shard, t.notBefore)],
);

/** Shard leases: which worker owns a shard, until when, under which fencing epoch. */
export const shardLeases = pgTable('shard_leases', {
  shard: integer('shard').primaryKey(),
  workerId: text('worker_id'),
  epoch: bigint('epoch', { mode: 'number' }).notNull().default(0),
  expiresAt: tstz('expires_at').notNull(),
});

/** Live workers, by heartbeat; the set the shards are balanced over. */
export const workers = pgTable('workers', {
  id: text('id').primaryKey(),
  startedAt: tstz('started_at').notNull(),
  heartbeatAt: tstz('heartbeat_at').notNull(),
  stoppedAt: tstz('stopped_at'),
});
