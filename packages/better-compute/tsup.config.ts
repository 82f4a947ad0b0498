import { defineConfig } from 'tsup';

export default defineConfig({
  entry: {
    core: 'src/core.ts',
    provision: 'src/provision.ts',
    metal: 'src/metal.ts',
    pki: 'src/pki.ts',
    testkit: 'src/testkit.ts',
    'core-pglite': 'src/core-pglite.ts',
    'core-postgres': 'src/core-postgres.ts',
    'core-nodes': 'src/core-nodes.ts',
    'core-conformance': 'src/core-conformance.ts',
    'core-kernel': 'src/core-kernel.ts',
    'core-checks': 'src/core-checks.ts',
    cli: 'src/cli.ts',
  },
  format: ['esm'],
  dts: { compilerOptions: { composite: false, customConditions: [] } },
  clean: true,
  target: 'node20',
});
