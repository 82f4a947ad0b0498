import { fileURLToPath } from 'node:url';

// This file sits directly in src/, and the bundle's entry directly in dist/, so `../migrations` is the package's
// migrations folder from both.
/**
 * The folder of pki's drizzle-kit migrations.
 *
 * @example
 * ```ts
 * await applyMigrations(db, [{ module: 'pki', migrations: await readMigrationFolder(pkiMigrationsFolder) }], clock);
 * ```
 */
export const pkiMigrationsFolder: string = fileURLToPath(new URL('../migrations', import.meta.url));
