import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ComputeError } from '../errors';

/** One migration: a name that sorts in apply order, and its SQL (statements split by `--> statement-breakpoint`). */
export interface Migration {
  readonly name: string;
  readonly sql: string;
}

/** Where a module's migrations come from: a list, or a drizzle-kit output folder (with `meta/_journal.json`). */
export type MigrationSource = readonly Migration[] | { readonly folder: string };

interface Journal {
  entries: { idx: number; tag: string }[];
}

/**
 * Reads a drizzle-kit migrations folder in journal order.
 *
 * @example
 * ```ts
 * const migrations = await readMigrationFolder(fileURLToPath(new URL('../migrations', import.meta.url)));
 * ```
 */
export async function readMigrationFolder(folder: string): Promise<Migration[]> {
  let journal: Journal;
  try {
    journal = JSON.parse(await readFile(join(folder, 'meta', '_journal.json'), 'utf8')) as Journal;
  } catch (cause) {
    throw new ComputeError('INVALID_CONFIG', `no drizzle-kit journal in ${folder}`, {
      details: { path: ['migrations', 'folder'] },
      cause,
    });
  }
  const entries = [...journal.entries].sort((a, b) => a.idx - b.idx);
  return Promise.all(
    entries.map(async (entry) => ({ name: entry.tag, sql: await readFile(join(folder, `${entry.tag}.sql`), 'utf8') })),
  );
}

/** Resolves a {@link MigrationSource} to its list. */
export async function loadMigrations(source: MigrationSource | undefined): Promise<readonly Migration[]> {
  if (!source) return [];
  if ('folder' in source) return readMigrationFolder(source.folder);
  return source;
}

/** Splits a migration into statements the way drizzle-kit writes them. */
export function splitStatements(sql: string): string[] {
  return sql
    .split('--> statement-breakpoint')
    .map((part) => part.trim())
    .filter((part) => part.length > 0);
}
