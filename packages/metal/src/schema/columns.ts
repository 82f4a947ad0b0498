import { timestamp } from 'drizzle-orm/pg-core';

/** A `timestamptz` column; the engine always writes it from the kernel's Clock. */
export const tstz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });
