import { fileURLToPath } from 'node:url';

// This file sits directly in src/, and the bundle's entry directly in dist/, so `../migrations` is the package's
// migrations folder from both.
/**
 * The folder of metal's drizzle-kit migrations.
 *
 * @example
 * ```ts
 * const module = { id: 'metal', migrations: { folder: metalMigrationsFolder } };
 * ```
 */
export const metalMigrationsFolder: string = fileURLToPath(new URL('../migrations', import.meta.url));
