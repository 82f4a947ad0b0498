import { defineConfig } from 'tsup';

export default defineConfig({
  entry: { index: 'src/index.ts', 'agent-api/index': 'src/agent-api/index.ts' },
  format: ['esm'],
  dts: { compilerOptions: { composite: false, customConditions: [] } },
  clean: true,
  target: 'node20',
});
