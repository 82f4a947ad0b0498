import { readFileSync } from 'node:fs';
import { defineConfig } from 'tsup';

const { version } = JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8')) as { version: string };

export default defineConfig({
  // bin: the command (each command's module a chunk of its own, imported when that command runs); index: the library.
  entry: { index: 'src/index.ts', bin: 'src/bin.ts' },
  format: ['esm'],
  dts: { entry: { index: 'src/index.ts' }, compilerOptions: { composite: false, customConditions: [] } },
  clean: true,
  splitting: true,
  target: 'node20',
  define: { __CLI_VERSION__: JSON.stringify(version) },
});
