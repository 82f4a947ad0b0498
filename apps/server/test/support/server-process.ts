import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The server package's folder: the child runs there, so `--import tsx` resolves. */
export const SERVER_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** What `pnpm start` runs, from the server's folder. */
export const SERVER_ARGS = ['--conditions=source', '--import', 'tsx', 'src/main.ts'];

/** A server child process and what it printed. */
export interface ServerProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
  dataDir: string;
  apiUrl: string;
  agentUrl: string | undefined;
  adminToken: string | undefined;
  /** The CA certificate the server issued its certificate from. */
  ca: string;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

/** A fresh temp folder for a server's data. */
export async function tempDir(prefix = 'bc-server-'): Promise<{ path: string; remove(): Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), prefix));
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}

/**
 * The minimal environment a server or CLI child starts with: PATH, HOME and, when the test runner set one, the PGlite
 * template a new data directory starts from (core's BETTER_COMPUTE_PGLITE_TEMPLATE: 1 s instead of 3.5 for initdb).
 */
export function childEnvironment(): Record<string, string> {
  const template = process.env.BETTER_COMPUTE_PGLITE_TEMPLATE;
  return {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/tmp',
    ...(template ? { BETTER_COMPUTE_PGLITE_TEMPLATE: template } : {}),
  };
}

/** How a server child is launched: by default `node` with {@link SERVER_ARGS} from the server's folder. */
export interface ServerCommand {
  file: string;
  args: string[];
  cwd: string;
}

/**
 * Spawns the server with `env` on top of a minimal environment and `args` as its flags (after `command`'s own, e.g.
 * `pnpm start` from the repository's root); does not wait.
 */
export function spawnServer(env: Record<string, string>, args: string[] = [], command?: ServerCommand) {
  const launch = command ?? { file: process.execPath, args: SERVER_ARGS, cwd: SERVER_DIR };
  const child = spawn(launch.file, [...launch.args, ...args], {
    cwd: launch.cwd,
    env: { ...childEnvironment(), ...env },
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
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, stdout: () => out, stderr: () => err, exited };
}

/**
 * Starts the server on ports chosen by the system (PORT=0, AGENT_PORT=0) and waits for its banner: the URLs, the CA
 * file and, on a first start, the admin token.
 */
export async function startServer(options: {
  env?: Record<string, string>;
  args?: string[];
  dataDir: string;
  timeoutMs?: number;
  command?: ServerCommand;
}): Promise<ServerProcess> {
  const spawned = spawnServer(
    { DATA_DIR: options.dataDir, PORT: '0', AGENT_PORT: '0', LOG_LEVEL: 'debug', ...options.env },
    options.args,
    options.command,
  );
  // A fresh PGlite data dir takes about 10 s to initialise and migrate on an idle 2-core machine; CI runs two files at once.
  const deadline = Date.now() + (options.timeoutMs ?? 50_000);
  let exitCode: number | null | undefined;
  void spawned.exited.then((code) => {
    exitCode = code;
  });
  for (;;) {
    const out = spawned.stdout();
    // The banner is written in one piece; its health line is in every role's.
    if (/^ {2}health {7}.*$/m.test(out)) break;
    if (exitCode !== undefined) {
      throw new Error(`the server exited with ${exitCode}:\n${spawned.stdout()}\n${spawned.stderr()}`);
    }
    if (Date.now() > deadline) {
      spawned.child.kill('SIGKILL');
      throw new Error(`the server did not start in time:\n${spawned.stdout()}\n${spawned.stderr()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const out = spawned.stdout();
  const apiUrl = /^ {2}health {7}(\S+)\/healthz/m.exec(out)?.[1] as string;
  const agentUrl = /^ {2}agent API {4}(\S+)\/agent\/v1/m.exec(out)?.[1];
  const adminToken = /^ {2}admin token {2}(\S+)/m.exec(out)?.[1];
  const caFile = /^ {2}CA {11}(\S+)/m.exec(out)?.[1];
  return {
    ...spawned,
    dataDir: options.dataDir,
    apiUrl,
    agentUrl,
    adminToken,
    ca: caFile ? readFileSync(caFile, 'utf8') : '',
    async stop() {
      if (spawned.child.exitCode === null) spawned.child.kill('SIGTERM');
      return spawned.exited;
    },
  };
}

/** An answer of {@link call}. */
export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: () => Record<string, unknown>;
}

/** One HTTPS (or HTTP) request trusting `ca`, with an optional client certificate. */
export function call(
  url: string,
  options: {
    method?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    ca?: string;
    cert?: string;
    key?: string;
  } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const requester = target.protocol === 'https:' ? httpsRequest : (httpRequest as typeof httpsRequest);
    const req = requester(
      target,
      {
        method: options.method ?? 'GET',
        headers: options.headers,
        ...(options.ca ? { ca: options.ca } : {}),
        ...(options.cert ? { cert: options.cert, key: options.key } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: () => JSON.parse(text) });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (options.body !== undefined) req.write(options.body);
    req.end();
  });
}

/** `POST <apiUrl>/v1/<method>` with a bearer token and a JSON body. */
export function api(server: ServerProcess, method: string, body: unknown, token = server.adminToken ?? '') {
  return call(`${server.apiUrl}/v1/${method}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    ca: server.ca,
  });
}
