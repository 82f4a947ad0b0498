import { type ChildProcess, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const SCRIPT = fileURLToPath(new URL('../fixtures/engine-worker.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** How a worker process ended: its exit code or signal, what it printed, and the boundaries it crossed. */
export interface WorkerExit {
  code: number | string;
  boundaries: number | undefined;
  stderr: string;
}

/** What else {@link runWorkerProcess} takes. */
export interface WorkerProcessOptions {
  /** The worker's script, as a file URL (default `tests/fixtures/engine-worker.ts`). */
  script?: URL;
  /** Open an IPC channel to the child (`child.send`, `process.send` in the child). */
  ipc?: boolean;
}

// Each worker script bundled once per test file: a process of the sweeps starts from one file in 0.3 s, where
// `--import tsx` over the packages' sources takes 1.2 to 1.7 s of CPU (22 processes in the SIGKILL sweep alone). The
// workspace's packages are bundled from their sources (the `source` condition, as the tests run them); every other
// package stays an import of the file it resolves to, so PGlite finds its WebAssembly beside it.
const bundles = new Map<string, Promise<string>>();
let bundleDir: Promise<string> | undefined;

async function bundled(script: string): Promise<string> {
  let made = bundles.get(script);
  if (!made) {
    made = (async () => {
      bundleDir ??= mkdtemp(join(tmpdir(), 'bc-worker-bundle-')).then((dir) => {
        process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
        return dir;
      });
      const outfile = join(await bundleDir, basename(script).replace(/\.ts$/, '.mjs'));
      await build({
        entryPoints: [script],
        outfile,
        bundle: true,
        platform: 'node',
        format: 'esm',
        target: 'node20',
        conditions: ['source'],
        logLevel: 'error',
        plugins: [
          {
            name: 'third-party-external',
            setup(on) {
              on.onResolve({ filter: /^[^./]/ }, async (args) => {
                if (args.path.startsWith('node:')) return { external: true };
                if (/^(better-compute|@better-compute)(\/|$)/.test(args.path) || args.pluginData) return undefined;
                const found = await on.resolve(args.path, {
                  kind: args.kind,
                  resolveDir: args.resolveDir,
                  pluginData: true,
                });
                return found.errors.length > 0 ? undefined : { path: found.path, external: true };
              });
              // A module that finds a folder beside itself (the migrations) finds it where its source is.
              on.onLoad({ filter: /\/(packages|tests)\/.*\.ts$/ }, async (args) => {
                const text = await readFile(args.path, 'utf8');
                if (!text.includes('import.meta.url')) return undefined;
                const url = JSON.stringify(pathToFileURL(args.path).href);
                return { contents: text.replaceAll('import.meta.url', url), loader: 'ts' };
              });
            },
          },
        ],
      });
      return outfile;
    })();
    bundles.set(script, made);
  }
  return made;
}

/**
 * Runs `tests/fixtures/engine-worker.ts` (or `options.script`), bundled, in a child process (the packages' sources,
 * as the tests run them) until it exits, while `whileRunning` is called every 20 ms (the agents answering) with
 * the child process.
 */
export async function runWorkerProcess(
  env: Record<string, string>,
  whileRunning: (child: ChildProcess) => Promise<void>,
  options: WorkerProcessOptions = {},
): Promise<WorkerExit> {
  const script = await bundled(options.script === undefined ? SCRIPT : fileURLToPath(options.script));
  const child = spawn(process.execPath, [script], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: options.ipc ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    err += chunk.toString();
  });
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown'));
  });
  let done = false;
  void exited.then(() => {
    done = true;
  });
  while (!done) {
    await whileRunning(child);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const match = /boundaries (\d+)/.exec(out);
  return { code: await exited, boundaries: match ? Number(match[1]) : undefined, stderr: err };
}
