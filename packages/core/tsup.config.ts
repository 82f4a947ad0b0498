import { defineConfig } from 'tsup';

export default defineConfig({
  entry: {
    index: 'src/index.ts',
    'pglite/index': 'src/pglite/index.ts',
    'postgres/index': 'src/postgres/index.ts',
    'nodes/index': 'src/nodes/index.ts',
    'conformance/index': 'src/conformance/index.ts',
    'kernel/index': 'src/entries/kernel.ts',
    'checks/index': 'src/checks/index.ts',
  },
  format: ['esm'],
  dts: { compilerOptions: { composite: false, customConditions: [] } },
  clean: true,
  target: 'node20',
});
