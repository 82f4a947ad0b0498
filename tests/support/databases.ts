import { type SqlDatabase, ulid } from 'better-compute/core';
import { createPgliteDatabase } from 'better-compute/core/pglite';
import { createPostgresDatabase } from 'better-compute/core/postgres';

/** The PostgreSQL server the suites may use, when `TEST_DATABASE_URL` is set (CI always sets it). */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL;

/** A database made for one test file, and how to throw it away. */
export interface ScratchDatabase {
  db: SqlDatabase;
  /** Another handle on the same database (a second process's pool); PostgreSQL only. */
  connect(): SqlDatabase;
  url?: string;
  drop(): Promise<void>;
}

/** A fresh in-memory PGlite. */
export async function scratchPglite(): Promise<ScratchDatabase> {
  const db = await createPgliteDatabase();
  return {
    db,
    connect: () => {
      throw new Error('PGlite has one connection');
    },
    drop: () => db.close(),
  };
}

/** A fresh, empty database on the server of `TEST_DATABASE_URL`, dropped by `drop()`. */
export async function scratchPostgres(): Promise<ScratchDatabase> {
  if (!TEST_DATABASE_URL) throw new Error('TEST_DATABASE_URL is not set');
  const name = `bc_test_${ulid().toLowerCase()}`;
  const admin = createPostgresDatabase({ url: TEST_DATABASE_URL, max: 1 });
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  const handles: SqlDatabase[] = [];
  const connect = () => {
    const handle = createPostgresDatabase({ url: url.toString() });
    handles.push(handle);
    return handle;
  };
  return {
    db: connect(),
    connect,
    url: url.toString(),
    drop: async () => {
      await Promise.all(handles.map((h) => h.close()));
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.close();
    },
  };
}

/** The backends an engine suite runs on: PGlite always, PostgreSQL when `TEST_DATABASE_URL` is set. */
export const BACKENDS = [
  { name: 'pglite', create: scratchPglite },
  ...(TEST_DATABASE_URL ? [{ name: 'postgres', create: scratchPostgres }] : []),
] as const;
