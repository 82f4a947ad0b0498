import { ulid } from '../../src/ids';
import { createPgliteDatabase } from '../../src/pglite';
import { createPostgresDatabase } from '../../src/postgres';
import type { SqlDatabase } from '../../src/sql';

/** The PostgreSQL server the suite may use, when `TEST_DATABASE_URL` is set (CI always sets it). */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL;

/** A database made for one test file, and how to throw it away. */
export interface ScratchDatabase {
  db: SqlDatabase;
  /** Opens another handle on the same database (another pool, as a second process would). */
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
      throw new Error('PGlite has one connection; a second handle is not possible');
    },
    drop: () => db.close(),
  };
}

/** A fresh, empty database on the PostgreSQL server of `TEST_DATABASE_URL`, dropped at the end. */
export async function scratchPostgres(): Promise<ScratchDatabase> {
  if (!TEST_DATABASE_URL) throw new Error('TEST_DATABASE_URL is not set');
  const name = `bc_test_${ulid()}`;
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
  const db = connect();
  return {
    db,
    connect,
    url: url.toString(),
    drop: async () => {
      await Promise.all(handles.map((h) => h.close()));
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.close();
    },
  };
}

/** The backends a conformance suite runs on: PGlite always, PostgreSQL when `TEST_DATABASE_URL` is set. */
export const BACKENDS = [
  { name: 'pglite', create: scratchPglite, enabled: true },
  { name: 'postgres', create: scratchPostgres, enabled: Boolean(TEST_DATABASE_URL) },
] as const;
