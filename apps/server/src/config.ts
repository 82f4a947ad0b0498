import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import { ComputeError } from '@better-compute/core';
import { Command, CommanderError, Option } from 'commander';

/** Which parts of the control plane a process runs. */
export type ServerRole = 'all' | 'api' | 'worker';

/** A log level pino knows. */
export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

/** The validated configuration of one server process. */
export interface ServerConfig {
  role: ServerRole;
  /** PostgreSQL URL; undefined means PGlite in `<dataDir>/pglite`. */
  databaseUrl: string | undefined;
  /** Where the embedded database, the key file and the TLS material live (absolute). */
  dataDir: string;
  host: string;
  port: number;
  agentPort: number;
  /** The at-rest key as given, or undefined to read or create `keyFile`. */
  secretKey: string | undefined;
  keyFile: string;
  /** The destructive-batch quorum as JSON, or undefined (off). */
  quorum: { approvers: { id: string; publicKey: unknown }[]; threshold: number } | undefined;
  tls: {
    /** false: the operator API is plain HTTP (behind a proxy that terminates TLS). The agent port is always TLS. */
    enabled: boolean;
    certFile: string | undefined;
    keyFile: string | undefined;
    caFile: string | undefined;
    /** DNS names and IPs the issued server certificate names. */
    hostnames: string[];
    ips: string[];
  };
  logLevel: LogLevel;
  workers: number;
  shards: number;
  /** The plugin config module (absolute path), if any. */
  configModule: string | undefined;
  adminToken: string | undefined;
  /** When set, `/metrics` answers only `Authorization: Bearer <metricsToken>` (METRICS_TOKEN). */
  metricsToken: string | undefined;
  corsOrigins: string[];
  maxBodyBytes: number;
  requestTimeoutMs: number;
  shutdownTimeoutMs: number;
  sseHeartbeatMs: number;
  ssePollMs: number;
  /** `--simulate N`: also start a simulated site of N machines over the agent API (0: none). */
  simulate: number;
}

/** The environment variables the server reads, with their flags and defaults, for `--help` and the README. */
export const ENV_VARIABLES = [
  'ROLE',
  'DATABASE_URL',
  'DATA_DIR',
  'HOST',
  'PORT',
  'AGENT_PORT',
  'BETTER_COMPUTE_SECRET_KEY',
  'BETTER_COMPUTE_SECRET_KEY_FILE',
  'BETTER_COMPUTE_QUORUM',
  'TLS',
  'TLS_CERT',
  'TLS_KEY',
  'TLS_CA',
  'TLS_HOSTNAMES',
  'LOG_LEVEL',
  'WORKERS',
  'SHARDS',
  'BETTER_COMPUTE_CONFIG',
  'BETTER_COMPUTE_ADMIN_TOKEN',
  'METRICS_TOKEN',
  'CORS_ORIGINS',
  'MAX_BODY_BYTES',
  'REQUEST_TIMEOUT_MS',
  'SHUTDOWN_TIMEOUT_MS',
  'SSE_HEARTBEAT_MS',
  'SSE_POLL_MS',
  'SIMULATE',
] as const;

type EnvName = (typeof ENV_VARIABLES)[number];

function invalid(name: string, message: string): ComputeError {
  return new ComputeError('INVALID_CONFIG', `${name} ${message}`, { details: { path: [name] } });
}

const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const ROLES: readonly ServerRole[] = ['all', 'api', 'worker'];
// The admin token core's createCredential makes: bc_<ulid>_<256-bit base64url secret>.
const ADMIN_TOKEN = /^bc_[0-9a-hjkmnp-tv-z]{26}_[A-Za-z0-9_-]{43}$/;
// What a scraper sends as a bearer token (RFC 6750's token68 characters), long enough not to be guessed.
const METRICS_TOKEN = /^[A-Za-z0-9._~+/=-]{24,512}$/;

function integer(name: string, raw: string | undefined, fallback: number, min: number, max: number): number {
  if (raw === undefined || raw.trim() === '') return fallback;
  if (!/^[0-9]+$/.test(raw.trim())) throw invalid(name, `must be a whole number from ${min} to ${max}`);
  const value = Number(raw.trim());
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw invalid(name, `must be a whole number from ${min} to ${max}`);
  }
  return value;
}

// The simulated site's agents talk to this process's agent API, so a worker-only process cannot host one.
function simulateCount(raw: string | undefined, role: string): number {
  const count = integer('SIMULATE', raw, 0, 0, 256);
  if (count > 0 && role === 'worker') throw invalid('SIMULATE', 'needs role all or api (the agent API serves it)');
  return count;
}

function list(raw: string | undefined): string[] {
  return (raw ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item.length > 0);
}

function readableFile(name: string, raw: string | undefined, cwd: string): string | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  const path = isAbsolute(raw) ? raw : resolve(cwd, raw);
  try {
    readFileSync(path);
  } catch {
    throw invalid(name, 'names a file that cannot be read');
  }
  return path;
}

function parseQuorum(raw: string | undefined, cwd: string): ServerConfig['quorum'] {
  if (raw === undefined || raw.trim() === '') return undefined;
  let text = raw.trim();
  if (text.startsWith('@')) {
    const path = readableFile('BETTER_COMPUTE_QUORUM', text.slice(1), cwd);
    text = readFileSync(path as string, 'utf8');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw invalid('BETTER_COMPUTE_QUORUM', 'must be JSON { approvers: [{ id, publicKey }], threshold } or @<file>');
  }
  const candidate = value as { approvers?: unknown; threshold?: unknown };
  if (typeof value !== 'object' || value === null || !Array.isArray(candidate.approvers)) {
    throw invalid('BETTER_COMPUTE_QUORUM', 'must be JSON { approvers: [{ id, publicKey }], threshold } or @<file>');
  }
  if (!Number.isInteger(candidate.threshold) || (candidate.threshold as number) < 1) {
    throw invalid('BETTER_COMPUTE_QUORUM', 'needs threshold, a whole number from 1 to the number of approvers');
  }
  return value as ServerConfig['quorum'];
}

function databaseUrl(raw: string | undefined): string | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw invalid('DATABASE_URL', 'must be a postgres:// URL');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw invalid('DATABASE_URL', 'must be a postgres:// URL');
  }
  return raw.trim();
}

function program(): Command {
  return new Command('better-compute-server')
    .description('The better-compute control plane. Every flag has an environment variable; a flag wins.')
    .exitOverride()
    .configureOutput({ writeErr: () => undefined, writeOut: (text) => process.stdout.write(text) })
    .allowExcessArguments(false)
    .addOption(new Option('--role <role>', 'all | api | worker (ROLE, default all)'))
    .addOption(new Option('--database-url <url>', 'PostgreSQL URL (DATABASE_URL); else PGlite in the data dir'))
    .addOption(
      new Option('--data-dir <dir>', 'embedded database, key file and TLS material (DATA_DIR, default ./data)'),
    )
    .addOption(new Option('--host <host>', 'address to listen on (HOST, default 0.0.0.0)'))
    .addOption(new Option('--port <port>', 'operator API port (PORT, default 8443)'))
    .addOption(new Option('--agent-port <port>', 'agent API port (AGENT_PORT, default 8444)'))
    .addOption(new Option('--tls <on|off>', 'TLS on the operator API (TLS, default on)'))
    .addOption(new Option('--log-level <level>', 'fatal … trace, silent (LOG_LEVEL, default info)'))
    .addOption(new Option('--workers <n>', 'workers in this process (WORKERS, default 1)'))
    .addOption(new Option('--shards <n>', 'shards keys hash into, fixed per database (SHARDS, default 64)'))
    .addOption(new Option('--config <module>', 'plugin config module (BETTER_COMPUTE_CONFIG)'))
    .addOption(new Option('--simulate <n>', 'also start a simulated site of n machines (SIMULATE, default 0)'));
}

const FLAG_ENV: Record<string, EnvName> = {
  role: 'ROLE',
  databaseUrl: 'DATABASE_URL',
  dataDir: 'DATA_DIR',
  host: 'HOST',
  port: 'PORT',
  agentPort: 'AGENT_PORT',
  tls: 'TLS',
  logLevel: 'LOG_LEVEL',
  workers: 'WORKERS',
  shards: 'SHARDS',
  config: 'BETTER_COMPUTE_CONFIG',
  simulate: 'SIMULATE',
};

/** What `--help` asked for: print nothing more and exit 0. */
export class HelpShown extends Error {}

/**
 * Reads and validates the configuration from the environment and the command-line flags (a flag wins over its
 * variable). Every bad value is INVALID_CONFIG whose `details.path` is `[<VARIABLE>]` and whose message starts with it;
 * a value is never repeated in the message.
 *
 * @example
 * ```ts
 * const config = loadConfig(process.env, process.argv.slice(2));
 * ```
 */
export function loadConfig(
  env: Readonly<Record<string, string | undefined>>,
  argv: readonly string[],
  cwd: string = process.cwd(),
): ServerConfig {
  const values: Partial<Record<EnvName, string>> = {};
  for (const name of ENV_VARIABLES) {
    const value = env[name];
    if (value !== undefined) values[name] = value;
  }
  const cli = program();
  try {
    cli.parse([...argv], { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === 'commander.helpDisplayed' || error.code === 'commander.help') throw new HelpShown();
      throw new ComputeError('INVALID_CONFIG', error.message.replace(/^error: /, ''), {
        details: { path: ['argv'] },
      });
    }
    throw error;
  }
  for (const [flag, value] of Object.entries(cli.opts<Record<string, string | undefined>>())) {
    const name = FLAG_ENV[flag];
    if (name !== undefined && value !== undefined) values[name] = value;
  }

  const role = (values.ROLE ?? 'all').trim() as ServerRole;
  if (!ROLES.includes(role)) throw invalid('ROLE', 'must be one of all, api, worker');
  const logLevel = (values.LOG_LEVEL ?? 'info').trim().toLowerCase() as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) throw invalid('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}`);

  const dataDir = resolve(cwd, values.DATA_DIR?.trim() || './data');
  const port = integer('PORT', values.PORT, 8443, 0, 65535);
  const agentPort = integer('AGENT_PORT', values.AGENT_PORT, 8444, 0, 65535);
  if (port !== 0 && port === agentPort && role !== 'worker') throw invalid('AGENT_PORT', 'must differ from PORT');

  const tlsRaw = (values.TLS ?? 'on').trim().toLowerCase();
  if (!['on', 'off', 'true', 'false', '1', '0'].includes(tlsRaw)) throw invalid('TLS', 'must be on or off');
  const certFile = readableFile('TLS_CERT', values.TLS_CERT, cwd);
  const tlsKeyFile = readableFile('TLS_KEY', values.TLS_KEY, cwd);
  if ((certFile === undefined) !== (tlsKeyFile === undefined)) {
    throw invalid(certFile === undefined ? 'TLS_CERT' : 'TLS_KEY', 'must be given together with the other');
  }
  const caFile = readableFile('TLS_CA', values.TLS_CA, cwd);
  const names = list(values.TLS_HOSTNAMES);
  const ipLike = /^[0-9.]+$|:/;
  for (const name of names) {
    if (!/^[A-Za-z0-9.*:-]+$/.test(name)) throw invalid('TLS_HOSTNAMES', 'must be a comma-separated list of names');
  }
  const hostnames = names.length > 0 ? names.filter((n) => !ipLike.test(n)) : ['localhost', hostname()];
  const ips = names.length > 0 ? names.filter((n) => ipLike.test(n)) : ['127.0.0.1', '::1'];

  const secretKey = values.BETTER_COMPUTE_SECRET_KEY?.trim() || undefined;
  if (secretKey !== undefined) {
    // The same check pki makes, with the variable's name; the value is never repeated.
    const hex = /^[0-9a-fA-F]{64}$/.test(secretKey);
    const b64 = /^[A-Za-z0-9+/_-]{43}=?$/.test(secretKey);
    if (!hex && !b64) throw invalid('BETTER_COMPUTE_SECRET_KEY', 'must be 32 bytes, as 64 hex digits or base64');
  }
  const keyFileRaw = values.BETTER_COMPUTE_SECRET_KEY_FILE?.trim();
  const keyFile = keyFileRaw ? resolve(cwd, keyFileRaw) : resolve(dataDir, 'secret.key');

  const adminToken = values.BETTER_COMPUTE_ADMIN_TOKEN?.trim() || undefined;
  if (adminToken !== undefined && !ADMIN_TOKEN.test(adminToken)) {
    throw invalid('BETTER_COMPUTE_ADMIN_TOKEN', 'must be a token as the server prints it (bc_<26>_<43>)');
  }

  const metricsToken = values.METRICS_TOKEN?.trim() || undefined;
  if (metricsToken !== undefined && !METRICS_TOKEN.test(metricsToken)) {
    throw invalid('METRICS_TOKEN', 'must be 24 to 512 characters of A-Z a-z 0-9 . _ ~ + / = -');
  }

  let configModule: string | undefined;
  if (values.BETTER_COMPUTE_CONFIG?.trim())
    configModule = readableFile('BETTER_COMPUTE_CONFIG', values.BETTER_COMPUTE_CONFIG, cwd);

  const corsOrigins = list(values.CORS_ORIGINS);
  for (const origin of corsOrigins) {
    if (origin === '*') continue;
    let url: URL | undefined;
    try {
      url = new URL(origin);
    } catch {
      url = undefined;
    }
    if (!url || url.origin !== origin) throw invalid('CORS_ORIGINS', 'must be * or a comma-separated list of origins');
  }

  return {
    role,
    databaseUrl: databaseUrl(values.DATABASE_URL),
    dataDir,
    host: values.HOST?.trim() || '0.0.0.0',
    port,
    agentPort,
    secretKey,
    keyFile,
    quorum: parseQuorum(values.BETTER_COMPUTE_QUORUM, cwd),
    tls: {
      enabled: ['on', 'true', '1'].includes(tlsRaw),
      certFile,
      keyFile: tlsKeyFile,
      caFile,
      hostnames,
      ips,
    },
    logLevel,
    workers: integer('WORKERS', values.WORKERS, 1, role === 'api' ? 0 : 1, 64),
    shards: integer('SHARDS', values.SHARDS, 64, 1, 4096),
    configModule,
    adminToken,
    metricsToken,
    corsOrigins,
    // compute.handler reads at most 1 MiB itself, so a larger limit here would only move the refusal.
    maxBodyBytes: integer('MAX_BODY_BYTES', values.MAX_BODY_BYTES, 1024 * 1024, 1024, 1024 * 1024),
    requestTimeoutMs: integer('REQUEST_TIMEOUT_MS', values.REQUEST_TIMEOUT_MS, 30_000, 100, 3_600_000),
    shutdownTimeoutMs: integer('SHUTDOWN_TIMEOUT_MS', values.SHUTDOWN_TIMEOUT_MS, 30_000, 0, 3_600_000),
    sseHeartbeatMs: integer('SSE_HEARTBEAT_MS', values.SSE_HEARTBEAT_MS, 15_000, 100, 3_600_000),
    ssePollMs: integer('SSE_POLL_MS', values.SSE_POLL_MS, 500, 10, 60_000),
    simulate: simulateCount(values.SIMULATE, role),
  };
}
