import { fileURLToPath } from 'node:url';

// This file sits directly in src/, and the bundle's entry directly in dist/, so `../migrations` is the package's
// migrations folder from both.
/**
 * The folder of provision's drizzle-kit migrations.
 *
 * @example
 * ```ts
 * await applyMigrations(db, [{ module: 'provision', migrations: await readMigrationFolder(provisionMigrationsFolder) }], clock);
 * ```
 */
export const provisionMigrationsFolder: string = fileURLToPath(new URL('../migrations', import.meta.url));
