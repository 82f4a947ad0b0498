import { sql } from 'drizzle-orm';
import { bigint, boolean, index, integer, jsonb, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';
import { tstz } from './columns';

/** The work queue: one row per (kind, key), due at `not_before`, processed by the worker holding its shard. */
export const workItems = pgTable(
  'work_items',
  {
    kind: text('kind').notNull(),
    key: text('key').notNull(),
    // fnv1a32(key) mod the shard count, fixed at the first enqueue.
    shard: integer('shard').notNull(),
    notBefore: tstz('not_before').notNull(),
    // Bumped by every enqueue, so finishing an item never deletes a wake-up that arrived while it ran.
    seq: bigint('seq', { mode: 'number' }).notNull().default(0),
    // The earliest notBefore asked by an enqueue since the item was last claimed; the claimed row's own not_before is
    // already past, so without this a future enqueue during processing would be indistinguishable from a due one.
    enqueuedNotBefore: tstz('enqueued_not_before'),
    attempts: integer('attempts').notNull().default(0),
    // Claimed ahead of routine items (ordered as if due URGENT_LEAD_MS earlier); cleared by the claim, so only an
    // urgent enqueue since then makes the next pass urgent.
    urgent: boolean('urgent').notNull().default(false),
    lastError: text('last_error'),
    // Parked: what the pass that requeued the item waits on (its reconciler's `park` SQL reads it), how often a claim
    // looks again and until when at the latest. A claim that finds the wait still holding postpones the item instead of
    // claiming it; any enqueue (and any claim) clears it.
    parkOn: jsonb('park_on'),
    parkEveryMs: integer('park_every_ms'),
    parkUntil: tstz('park_until'),
    claimedBy: text('claimed_by'),
    claimedAt: tstz('claimed_at'),
    createdAt: tstz('created_at').notNull(),
    updatedAt: tstz('updated_at').notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.kind, t.key] }),
    index('work_items_due_idx').on(t.shard, t.notBefore),
    index('work_items_not_before_idx').on(t.notBefore),
    // Claims read urgent items in due order apart from routine ones, without walking the whole backlog.
    index('work_items_urgent_idx').on(t.notBefore).where(sql`urgent`),
  ],
);

/** Shard leases: which worker owns a shard, until when, under which fencing epoch (bumped on every takeover). */
export const shardLeases = pgTable('shard_leases', {
  shard: integer('shard').primaryKey(),
  // NULL when released.
  workerId: text('worker_id'),
  epoch: bigint('epoch', { mode: 'number' }).notNull().default(0),
  expiresAt: tstz('expires_at').notNull(),
  acquiredAt: tstz('acquired_at'),
});

/** Workers, by heartbeat; the live ones (fresh heartbeat, not stopped) are the set the shards are balanced over. */
export const workers = pgTable('workers', {
  id: text('id').primaryKey(),
  startedAt: tstz('started_at').notNull(),
  heartbeatAt: tstz('heartbeat_at').notNull(),
  stoppedAt: tstz('stopped_at'),
});
