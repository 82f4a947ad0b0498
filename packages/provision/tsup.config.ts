import { defineConfig } from 'tsup';

export default defineConfig({
  entry: { index: 'src/index.ts' },
  format: ['esm'],
  dts: { compilerOptions: { composite: false, customConditions: [] } },
  clean: true,
  target: 'node20',
});
