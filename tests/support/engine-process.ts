import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const SCRIPT = fileURLToPath(new URL('../fixtures/engine-worker.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** How a worker process ended: its exit code or signal, what it printed, and the boundaries it crossed. */
export interface WorkerExit {
  code: number | string;
  boundaries: number | undefined;
  stderr: string;
}

/**
 * Runs `tests/fixtures/engine-worker.ts` in a child process (on the packages' `source` condition, as the tests do)
 * until it exits, while `whileRunning` is called every 20 ms (the agents answering).
 */
export async function runWorkerProcess(
  env: Record<string, string>,
  whileRunning: () => Promise<void>,
): Promise<WorkerExit> {
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', SCRIPT], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
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
    await whileRunning();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const match = /boundaries (\d+)/.exec(out);
  return { code: await exited, boundaries: match ? Number(match[1]) : undefined, stderr: err };
}
