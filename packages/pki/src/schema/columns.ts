import { timestamp } from 'drizzle-orm/pg-core';

/** A `timestamptz` column; this package always writes it from its Clock. */
export const tstz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });
