import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createHttpAgent, type HttpAgent } from '@better-compute/testkit';
import { build } from 'esbuild';

const HERE = dirname(fileURLToPath(import.meta.url));
/** packages/cli */
export const CLI_DIR = join(HERE, '..', '..');
const SERVER_DIR = join(CLI_DIR, '..', '..', 'apps', 'server');

/**
 * Bundles the bin as tsup does for the published package (one file per command, imported when it runs), into
 * `build/test-bin/<random>/` so its dependencies resolve from this package's node_modules. Returns the bin's path.
 */
export async function bundleCli(): Promise<string> {
  const outdir = join(CLI_DIR, 'build', 'test-bin', randomBytes(6).toString('hex'));
  mkdirSync(outdir, { recursive: true });
  await build({
    entryPoints: { bin: join(CLI_DIR, 'src', 'bin.ts') },
    outdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    define: { __CLI_VERSION__: JSON.stringify('0.0.0-test') },
    logLevel: 'error',
  });
  return join(outdir, 'bin.js');
}

/** Removes what {@link bundleCli} wrote. */
export async function removeBundle(bin: string | undefined): Promise<void> {
  if (bin) await rm(dirname(bin), { recursive: true, force: true });
}

/** A temp folder removed at the end. */
export async function tempDir(prefix: string): Promise<{ path: string; remove(): Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), prefix));
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}

/** The server child process, as `pnpm start` runs it, on PGlite in a temp data dir. */
export interface Server {
  child: ChildProcess;
  url: string;
  agentUrl: string;
  adminToken: string;
  caFile: string;
  ca: string;
  stop(): Promise<void>;
}

export async function startServer(dataDir: string, env: Record<string, string> = {}): Promise<Server> {
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', 'src/main.ts'], {
    cwd: SERVER_DIR,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      // A new data directory starts from the test runner's PGlite template (core's), not from initdb.
      ...(process.env.BETTER_COMPUTE_PGLITE_TEMPLATE
        ? { BETTER_COMPUTE_PGLITE_TEMPLATE: process.env.BETTER_COMPUTE_PGLITE_TEMPLATE }
        : {}),
      DATA_DIR: dataDir,
      PORT: '0',
      AGENT_PORT: '0',
      LOG_LEVEL: 'warn',
      SSE_POLL_MS: '100',
      SSE_HEARTBEAT_MS: '1000',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString('utf8');
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    err += chunk.toString('utf8');
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + 55_000;
  while (!/^ {2}health {7}.*$/m.test(out)) {
    if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}:\n${out}\n${err}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`the server did not start in time:\n${out}\n${err}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const url = /^ {2}health {7}(\S+)\/healthz/m.exec(out)?.[1] as string;
  const agentUrl = /^ {2}agent API {4}(\S+)\/agent\/v1/m.exec(out)?.[1] as string;
  const adminToken = /^ {2}admin token {2}(\S+)/m.exec(out)?.[1] as string;
  const caFile = /^ {2}CA {11}(\S+)/m.exec(out)?.[1] as string;
  return {
    child,
    url,
    agentUrl,
    adminToken,
    caFile,
    ca: readFileSync(caFile, 'utf8'),
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** What a CLI run printed and its exit code. */
export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the bundled bin with `args` (no TTY), the environment on top of a minimal one. */
export function runCli(
  bin: string,
  args: readonly string[],
  env: Record<string, string | undefined> = {},
  input?: string,
): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [bin, ...args],
      {
        env: Object.fromEntries(
          Object.entries({ PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env }).filter(
            (entry): entry is [string, string] => entry[1] !== undefined,
          ),
        ),
        timeout: 45_000,
        maxBuffer: 16 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout: stdout.toString(), stderr: stderr.toString() });
      },
    );
    if (input !== undefined) child.stdin?.end(input);
    else child.stdin?.end();
  });
}

/** The environment that points the CLI at `server` with the admin token, config under `configHome`. */
export function serverEnv(server: Server, configHome: string): Record<string, string> {
  return {
    XDG_CONFIG_HOME: configHome,
    BETTER_COMPUTE_URL: server.url,
    BETTER_COMPUTE_TOKEN: server.adminToken,
    BETTER_COMPUTE_CA: server.caFile,
  };
}

/** A call of the operator API from the test itself (set-up, checks). */
export async function api<T = Record<string, unknown>>(server: Server, method: string, body: unknown): Promise<T> {
  const { request } = await import('node:https');
  return new Promise((resolve, reject) => {
    const text = JSON.stringify(body);
    const req = request(`${server.url}/v1/${method}`, {
      method: 'POST',
      ca: server.ca,
      headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const answer = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        if ((res.statusCode ?? 500) >= 400) reject(new Error(`${method}: ${JSON.stringify(answer)}`));
        else resolve(answer as T);
      });
    });
    req.end(text);
  });
}

/** How the in-test site agent answers a BMC operation: succeed with a result, fail, or wait until released. */
export type BmcBehaviour = (operation: string) => Promise<{ result: Record<string, unknown> } | { fail: string }>;

/**
 * A site agent over the real agent API (the testkit's createHttpAgent, mutual TLS): joins the site with a join token,
 * opens a session and answers `driver.invoke` commands with `behaviour` until stopped.
 */
export async function startSiteAgent(
  server: Server,
  siteId: string,
  behaviour: BmcBehaviour,
): Promise<{ agent: HttpAgent; stop(): Promise<void>; operations: string[] }> {
  const { token } = await api<{ token: string }>(server, 'sites.joinToken', { tenantId: 'root', siteId });
  const agent = createHttpAgent({ baseUrl: server.agentUrl, ca: server.ca });
  await agent.join(token);
  await agent.openSession('site');
  let running = true;
  const operations: string[] = [];
  const loop = (async () => {
    while (running) {
      let commands: Awaited<ReturnType<HttpAgent['poll']>>;
      try {
        commands = await agent.poll({ waitMs: 500 });
      } catch {
        if (!running) return;
        await new Promise((resolve) => setTimeout(resolve, 100));
        continue;
      }
      for (const command of commands) {
        const payload = (command.payload ?? {}) as { operation?: string };
        await agent.ack(command.id);
        if (command.kind !== 'driver.invoke') {
          await agent.reject(command.id, `this test agent does not implement ${command.kind}`);
          continue;
        }
        await agent.start(command.id);
        const operation = String(payload.operation);
        operations.push(operation);
        const outcome = await behaviour(operation);
        // A command cancelled while the BMC call ran (its workflow aborted) refuses the report: a real agent drops it.
        const report =
          'fail' in outcome
            ? agent.fail(command.id, outcome.fail)
            : agent.complete(command.id, { result: outcome.result as never });
        await report.catch((error: unknown) => {
          const refusal = error as { code?: unknown; details?: { state?: unknown } };
          if (!(refusal.code === 'INVALID_STATE' && refusal.details?.state === 'cancelled')) throw error;
        });
      }
    }
  })();
  return {
    agent,
    operations,
    stop: async () => {
      running = false;
      await loop.catch(() => undefined);
      await agent.close().catch(() => undefined);
    },
  };
}

/** Writes a file in `dir` and returns its path. */
export async function writeTemp(dir: string, name: string, text: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, text);
  return path;
}

/** Waits for `check` to hold, polling every 50 ms. */
export async function until(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
