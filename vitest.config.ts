import { defineConfig } from 'vitest/config';

// Tests run on each package's `src` through the `source` export condition; users get `dist`.
export default defineConfig({
  resolve: { conditions: ['source'] },
  ssr: { resolve: { conditions: ['source'], externalConditions: ['source'] } },
  test: {
    include: ['packages/*/test/**/*.test.ts', 'tests/**/*.test.ts', 'apps/*/test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two test files at a time (vitest's default leaves one on a 2-core machine): the suite takes 7.5 minutes instead
    // of 10.5 here; the fault, crash and process-kill tests bound what they wait for by their own limits, not by an
    // idle machine.
    maxWorkers: 2,
  },
});
