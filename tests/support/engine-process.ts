import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

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

/**
 * Runs `tests/fixtures/engine-worker.ts` (or `options.script`) in a child process (on the packages' `source`
 * condition, as the tests do) until it exits, while `whileRunning` is called every 20 ms (the agents answering) with
 * the child process.
 */
export async function runWorkerProcess(
  env: Record<string, string>,
  whileRunning: (child: ChildProcess) => Promise<void>,
  options: WorkerProcessOptions = {},
): Promise<WorkerExit> {
  const script = options.script === undefined ? SCRIPT : fileURLToPath(options.script);
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', script], {
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
