import type { Clock, LogFields, Logger, SqlExecutor } from '@better-compute/core';
import { type SqlDatabase, ulid } from '@better-compute/core';
import { applyMigrations, coreMigrationsFolder, readMigrationFolder } from '@better-compute/core/kernel';
import { createPgliteDatabase } from '@better-compute/core/pglite';
import { createPostgresDatabase } from '@better-compute/core/postgres';
import { pkiMigrationsFolder } from '../../src';

/** The PostgreSQL server tests may use, when set. */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL;

/**
 * A database for one test file. pki keeps its own (as core does) rather than the testkit's: the testkit depends on pki
 * (its metal simulator wires pki), so pki cannot depend on the testkit.
 */
export interface Scratch {
  readonly db: SqlDatabase;
  /** Another pool on the same database (PostgreSQL only). */
  connect(options?: { max?: number }): SqlDatabase;
  readonly url?: string;
  drop(): Promise<void>;
}

/** A fresh in-memory PGlite. */
export async function scratchPglite(): Promise<Scratch> {
  const db = await createPgliteDatabase();
  return {
    db,
    connect: () => {
      throw new Error('PGlite has one connection');
    },
    drop: () => db.close(),
  };
}

/** A fresh database `bc_test_<ulid>` on the server of TEST_DATABASE_URL, dropped (whoever is connected) by `drop`. */
export async function scratchPostgres(): Promise<Scratch> {
  if (!TEST_DATABASE_URL) throw new Error('TEST_DATABASE_URL is not set');
  const name = `bc_test_${ulid().toLowerCase()}`;
  const admin = createPostgresDatabase({ url: TEST_DATABASE_URL, max: 1 });
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  const handles: SqlDatabase[] = [];
  const connect = (options: { max?: number } = {}) => {
    const handle = createPostgresDatabase({ url: url.toString(), ...options });
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

/** A clock that moves only when told. */
export interface FakeClock extends Clock {
  advance(ms: number): void;
  set(at: Date): void;
}

/** A fake clock starting at `start`. */
export function fakeClock(start = new Date('2026-03-01T12:00:00Z')): FakeClock {
  let at = start.getTime();
  return {
    now: () => new Date(at),
    advance: (ms) => {
      at += ms;
    },
    set: (date) => {
      at = date.getTime();
    },
  };
}

/** A logger that keeps every line as JSON text, so a test can search what was logged. */
export interface RecordingLogger extends Logger {
  lines: string[];
}

/** A {@link RecordingLogger}. */
export function recordingLogger(): RecordingLogger {
  const lines: string[] = [];
  const write = (level: string) => (message: string, fields?: LogFields) => {
    lines.push(JSON.stringify({ level, message, fields }));
  };
  return { lines, debug: write('debug'), info: write('info'), warn: write('warn'), error: write('error') };
}

/** Applies core's migrations, then pki's, and inserts tenants `root` and `acme` with a site each. */
export async function migrateAndSeed(db: SqlExecutor, clock: Clock): Promise<{ rootSite: string; acmeSite: string }> {
  await applyMigrations(
    db,
    [
      { module: 'core', migrations: await readMigrationFolder(coreMigrationsFolder) },
      { module: 'pki', migrations: await readMigrationFolder(pkiMigrationsFolder) },
    ],
    clock,
  );
  const now = clock.now();
  await db.query("INSERT INTO tenants (id, name, created_at) VALUES ('root', 'root', $1), ('acme', 'acme', $1)", [now]);
  await db.query(
    "INSERT INTO sites (id, tenant_id, name, created_at) VALUES ('site_root', 'root', 'r1', $1), ('site_acme', 'acme', 'a1', $1)",
    [now],
  );
  return { rootSite: 'site_root', acmeSite: 'site_acme' };
}

/** Inserts a machine node and returns its id. */
export async function insertNode(
  db: SqlExecutor,
  clock: Clock,
  input: { id: string; tenantId?: string; siteId?: string | null; kind?: string },
): Promise<string> {
  const now = clock.now();
  await db.query(
    `INSERT INTO nodes (id, tenant_id, site_id, kind, provision_state, created_at, updated_at)
     VALUES ($1, $2, $3, $4, 'available', $5, $5)`,
    [
      input.id,
      input.tenantId ?? 'root',
      input.siteId === undefined ? 'site_root' : input.siteId,
      input.kind ?? 'machine',
      now,
    ],
  );
  return input.id;
}

/**
 * Every table's text, varchar and jsonb cells that contain any of `needles`, as `table.column` names. A test asserts
 * this is empty to prove no secret value or token was stored in plaintext.
 */
export async function findPlaintext(db: SqlExecutor, needles: readonly string[]): Promise<string[]> {
  const { rows: columns } = await db.query<{ table_name: string; column_name: string }>(
    `SELECT table_name, column_name FROM information_schema.columns
     WHERE table_schema = current_schema() AND data_type IN ('text', 'character varying', 'jsonb', 'json')`,
  );
  const hits: string[] = [];
  for (const { table_name, column_name } of columns) {
    const { rows } = await db.query<{ v: string | null }>(`SELECT "${column_name}"::text AS v FROM "${table_name}"`);
    for (const { v } of rows) {
      if (v && needles.some((needle) => v.includes(needle))) hits.push(`${table_name}.${column_name}`);
    }
  }
  return hits;
}

/** The log lines that contain any of `needles`. */
export function findInLogs(log: RecordingLogger, needles: readonly string[]): string[] {
  return log.lines.filter((line) => needles.some((needle) => line.includes(needle)));
}
