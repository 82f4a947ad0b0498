import { customType, timestamp } from 'drizzle-orm/pg-core';

/** A `timestamptz` column; the kernel always writes it from its Clock. */
export const tstz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/** PostgreSQL's 64-bit transaction id, used to read the events outbox in commit-safe order. */
export const xid8 = customType<{ data: string }>({ dataType: () => 'xid8' });
