import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SERVER_DIR, type ServerProcess, startServer, tempDir } from './support/server-process';

// The README's command (`pnpm start`) under a supervisor that signals only the process it started: pnpm passes SIGTERM
// to its script's process, so the script must be the server itself (`exec node …`), not a shell that dies of the
// signal and leaves the server running without a parent.

const ROOT = join(SERVER_DIR, '..', '..');

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

let started: { server: ServerProcess; pid: number | undefined; remove(): Promise<void> } | undefined;

afterEach(async () => {
  // A server left behind by a failing run must not outlive the test.
  if (started?.pid !== undefined && running(started.pid)) process.kill(started.pid, 'SIGKILL');
  started?.server.child.kill('SIGKILL');
  await started?.remove();
  started = undefined;
});

describe.each([
  { name: 'pnpm start (the root)', args: ['start'], cwd: ROOT },
  {
    name: 'pnpm --filter @better-compute/server start',
    args: ['--filter', '@better-compute/server', 'start'],
    cwd: ROOT,
  },
])('$name', ({ args, cwd }) => {
  it('passes SIGTERM to the server, which drains and exits 0, and nothing is left running', async () => {
    const data = await tempDir('bc-pnpm-start-');
    const server = await startServer({ dataDir: data.path, command: { file: 'pnpm', args, cwd } });
    const pid = Number(/"pid":(\d+)/.exec(server.stdout() + server.stderr())?.[1]);
    started = { server, pid: Number.isSafeInteger(pid) ? pid : undefined, remove: data.remove };
    expect(started.pid).toBeDefined();
    expect(started.pid).not.toBe(server.child.pid);

    const code = await server.stop();

    expect(code).toBe(0);
    expect(server.stdout() + server.stderr()).toContain('"msg":"stopped"');
    expect(running(pid)).toBe(false);
  }, 90_000);
});
