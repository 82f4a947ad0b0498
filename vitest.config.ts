import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { defineConfig } from 'vitest/config';

// Every in-memory PGlite of the suite starts from one empty data directory written on the first start (core's
// BETTER_COMPUTE_PGLITE_TEMPLATE) instead of running initdb again: most test files make at least one, some one per
// test. Keyed by PGlite's version, so an upgrade writes a new one.
const require = createRequire(join(import.meta.dirname, 'packages/core/package.json'));
const pgliteDir = join(dirname(require.resolve('@electric-sql/pglite')), '..');
const pgliteVersion = (JSON.parse(readFileSync(join(pgliteDir, 'package.json'), 'utf8')) as { version: string })
  .version;
const pgliteTemplate = resolve(import.meta.dirname, `node_modules/.cache/better-compute/pglite-${pgliteVersion}.tar`);

// Tests run on each package's `src` through the `source` export condition; users get `dist`.
export default defineConfig({
  resolve: { conditions: ['source'] },
  ssr: { resolve: { conditions: ['source'], externalConditions: ['source'] } },
  test: {
    include: ['packages/*/test/**/*.test.ts', 'tests/**/*.test.ts', 'apps/*/test/**/*.test.ts'],
    env: { BETTER_COMPUTE_PGLITE_TEMPLATE: pgliteTemplate },
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // A fork runs file after file on one module graph instead of importing every package again per file: 66 s of
    // imports became 10, and the suite 414 s → 334 s here (CPU-bound on 2 cores). Files must therefore leave no
    // module-level state, process listeners or fake timers behind; the suite passes with its files shuffled
    // (`--sequence.shuffle.files`). Tests within a file may depend on their order.
    isolate: false,
    // Two test files at a time (vitest's default leaves one on a 2-core machine): the suite takes 7.5 minutes instead
    // of 10.5 here; the fault, crash and process-kill tests bound what they wait for by their own limits, not by an
    // idle machine.
    maxWorkers: 2,
  },
});
