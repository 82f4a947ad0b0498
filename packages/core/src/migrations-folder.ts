import { fileURLToPath } from 'node:url';

// This file sits directly in src/, and the bundle's entry directly in dist/, so `../migrations` is the package's
// migrations folder from both.
/** The folder of core's drizzle-kit migrations. */
export const coreMigrationsFolder: string = fileURLToPath(new URL('../migrations', import.meta.url));
