import { createScratchDatabase, type ScratchDatabase, scratchBackends } from 'better-compute/testkit';

export type { ScratchDatabase };

/** The PostgreSQL server the suites may use, when `TEST_DATABASE_URL` is set (CI always sets it). */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL;

/** A fresh in-memory PGlite. */
export const scratchPglite = (): Promise<ScratchDatabase> => createScratchDatabase();

/** A fresh, empty database on the server of `TEST_DATABASE_URL`, dropped by `drop()`. */
export async function scratchPostgres(): Promise<ScratchDatabase> {
  if (!TEST_DATABASE_URL) throw new Error('TEST_DATABASE_URL is not set');
  return createScratchDatabase({ url: TEST_DATABASE_URL });
}

/** The backends an engine suite runs on: PGlite always, PostgreSQL when `TEST_DATABASE_URL` is set. */
export const BACKENDS = scratchBackends(TEST_DATABASE_URL);
