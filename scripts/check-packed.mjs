#!/usr/bin/env node
// Packs every publishable package, installs the tarballs into a fresh project outside the workspace, and imports every
// export there: what users get must carry no `workspace:` ranges, no source paths, and must load from `dist`.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const packagesDir = join(root, 'packages');
const work = mkdtempSync(join(tmpdir(), 'bc-packed-'));
const tarballs = join(work, 'tarballs');
mkdirSync(tarballs);

const run = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'inherit'] }).toString();

try {
  run('pnpm', ['-r', '--filter', './packages/*', 'build'], root);
  const manifests = [];
  for (const dir of readdirSync(packagesDir)) {
    const manifest = JSON.parse(readFileSync(join(packagesDir, dir, 'package.json'), 'utf8'));
    if (manifest.private) continue;
    run('pnpm', ['pack', '--pack-destination', tarballs], join(packagesDir, dir));
    manifests.push(manifest);
  }
  const problems = [];
  for (const file of readdirSync(tarballs)) {
    const listing = run('tar', ['-tzf', join(tarballs, file)], work);
    const packed = JSON.parse(run('tar', ['-xzOf', join(tarballs, file), 'package/package.json'], work));
    const text = JSON.stringify(packed);
    if (text.includes('workspace:')) problems.push(`${file}: a workspace: range leaks into package.json`);
    if (/"\.\/src\//.test(text) || text.includes('"source"')) problems.push(`${file}: a source path leaks`);
    if (listing.split('\n').some((line) => line.startsWith('package/src/'))) problems.push(`${file}: ships src/`);
  }
  if (problems.length > 0) throw new Error(problems.join('\n'));

  const app = join(work, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'packed-app', private: true, type: 'module' }));
  const files = readdirSync(tarballs).map((file) => join(tarballs, file));
  run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', ...files], app);

  const imports = [];
  for (const manifest of manifests) {
    for (const sub of Object.keys(manifest.exports)) {
      imports.push(sub === '.' ? manifest.name : `${manifest.name}/${sub.slice(2)}`);
    }
  }
  const probe = imports.map((spec, i) => `import * as m${i} from '${spec}'; void m${i};`).join('\n');
  writeFileSync(join(app, 'probe.mjs'), `${probe}\nconsole.log('imported ${imports.length} entry points');\n`);
  process.stdout.write(run('node', ['probe.mjs'], app));
  const core = `import { ComputeError } from '@better-compute/core';\nimport { createPgliteDatabase } from 'better-compute/core/pglite';\nconst db = await createPgliteDatabase();\nconst { rows } = await db.query('SELECT 1 AS one');\nif (rows[0].one !== 1 || !(new ComputeError('NOT_FOUND', 'x') instanceof Error)) process.exit(1);\nawait db.close();\nconsole.log('packed core runs on PGlite');\n`;
  writeFileSync(join(app, 'run.mjs'), core);
  process.stdout.write(run('node', ['run.mjs'], app));
  // The engine from the tarballs: its migrations ship with it, and a workflow of one step runs to the end.
  const workflow = [
    "import { betterCompute, manifest } from 'better-compute/core';",
    "import { defineProfile, defineStep, getWorkflow, provisionModule } from 'better-compute/provision';",
    "const hello = defineStep({ id: 'packed.hello', runsOn: 'control-plane', timeout: '1m', retrySafe: true, input: manifest({}), run: async () => ({ hello: 'world' }) });",
    "const profile = defineProfile({ id: 'packed', version: 1, target: 'metal', steps: [{ use: 'packed.hello' }] });",
    'const compute = await betterCompute({ modules: [provisionModule({ steps: [hello], profiles: [profile] })] });',
    "const { id } = await compute.database.transaction((tx) => compute.context.workflows.start(tx, { tenantId: 'root', profileId: 'packed' }));",
    'while ((await compute.runDueWork()) > 0) {}',
    'const wf = await getWorkflow(compute.database, { workflowId: id });',
    "if (wf.state !== 'succeeded' || wf.steps[0].result.hello !== 'world') process.exit(1);",
    'await compute.close();',
    "console.log('packed provision runs a workflow on PGlite');",
  ].join('\n');
  writeFileSync(join(app, 'workflow.mjs'), `${workflow}\n`);
  process.stdout.write(run('node', ['workflow.mjs'], app));
  // The bin, from the installed tarballs (@better-compute/cli's, which the umbrella better-compute exposes too): --help
  // runs, exits 0, and starts fast from cold.
  const bin = join(app, 'node_modules', '.bin', 'better-compute');
  const started = performance.now();
  const help = run(bin, ['--help'], app);
  const ms = Math.round(performance.now() - started);
  if (!help.includes('Usage: better-compute') || !help.includes('workflows')) {
    throw new Error(`better-compute --help printed something else:\n${help}`);
  }
  const umbrella = run('node', [join(app, 'node_modules', 'better-compute', 'dist', 'cli.js'), '--version'], app);
  if (umbrella.trim() !== JSON.parse(readFileSync(join(packagesDir, 'cli', 'package.json'), 'utf8')).version) {
    throw new Error(`better-compute's bin printed ${umbrella.trim()} for --version`);
  }
  console.log(`packed better-compute --help runs (${ms} ms), and the umbrella's bin too`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
