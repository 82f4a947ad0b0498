import { type SqlDatabase, ulid } from '@better-compute/core';
import { createPgliteDatabase } from '@better-compute/core/pglite';
import { createPostgresDatabase } from '@better-compute/core/postgres';

/** A database made for one test file (or one benchmark scenario), and how to throw it away. */
export interface ScratchDatabase {
  /** The first handle, opened with the database. */
  readonly db: SqlDatabase;
  /**
   * Another handle on the same database, as a second process's pool would be; closed by `drop()`. PostgreSQL only:
   * PGlite has one connection, and this throws there.
   */
  connect(options?: { max?: number }): SqlDatabase;
  /** The database's URL; PostgreSQL only. */
  readonly url?: string;
  /** Closes every handle and, on PostgreSQL, drops the database. */
  drop(): Promise<void>;
}

/**
 * A fresh, empty database: an in-memory PGlite without `url`; with `url` (a PostgreSQL server, e.g. your
 * `TEST_DATABASE_URL`), a new database `bc_test_<ulid>` created on that server, which `drop()` removes whoever is still
 * connected. Nothing is migrated: `betterCompute` applies the migrations of the modules it is given. Each test file
 * gets its own, so no run depends on what an earlier one left behind.
 *
 * @example
 * ```ts
 * const scratch = await createScratchDatabase({ url: process.env.TEST_DATABASE_URL });
 * const compute = await betterCompute({ database: scratch.db, modules: [myModule] });
 * // …
 * await compute.close();
 * await scratch.drop();
 * ```
 */
export async function createScratchDatabase(options: { url?: string } = {}): Promise<ScratchDatabase> {
  if (options.url === undefined) return scratchPglite();
  return scratchPostgres(options.url);
}

/**
 * The backends to run one suite on, as the kernel's own suites do: PGlite always, PostgreSQL when `url` is given.
 *
 * @example
 * ```ts
 * for (const backend of scratchBackends(process.env.TEST_DATABASE_URL)) {
 *   describe(backend.name, () => defineMyPluginSuite(backend.create));
 * }
 * ```
 */
export function scratchBackends(
  url: string | undefined,
): readonly { name: 'pglite' | 'postgres'; create: () => Promise<ScratchDatabase> }[] {
  return [
    { name: 'pglite', create: () => scratchPglite() },
    ...(url === undefined ? [] : [{ name: 'postgres' as const, create: () => scratchPostgres(url) }]),
  ];
}

async function scratchPglite(): Promise<ScratchDatabase> {
  const db = await createPgliteDatabase();
  return {
    db,
    connect: () => {
      throw new Error('PGlite has one connection: a second handle is not possible');
    },
    drop: () => db.close(),
  };
}

async function scratchPostgres(serverUrl: string): Promise<ScratchDatabase> {
  // Lower case: an unquoted identifier is folded to it anyway, and the URL must name the same database.
  const name = `bc_test_${ulid().toLowerCase()}`;
  const admin = createPostgresDatabase({ url: serverUrl, max: 1 });
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } catch (err) {
    await admin.close();
    throw err;
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const handles: SqlDatabase[] = [];
  const connect = (connectOptions: { max?: number } = {}) => {
    const handle = createPostgresDatabase({ url: url.toString(), ...connectOptions });
    handles.push(handle);
    return handle;
  };
  return {
    db: connect(),
    connect,
    url: url.toString(),
    drop: async () => {
      await Promise.all(handles.splice(0).map((handle) => handle.close()));
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.close();
    },
  };
}
