import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { CliError, usage } from './errors';

/** One named connection: where the server is, the token, the CA it trusts and the tenant acted on. */
export interface ContextEntry {
  url: string;
  token?: string;
  /** The PEM of the CA the server's certificate chains to (kept in the file, not a path). */
  ca?: string;
  tenant: string;
}

/** The config file: its contexts and the one in use. */
export interface ConfigFile {
  current?: string;
  contexts: Record<string, ContextEntry>;
}

/**
 * Where the config file lives: `$XDG_CONFIG_HOME/better-compute/config.json`, else `~/.config/…` (on Windows,
 * `%APPDATA%\better-compute\config.json`).
 */
export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  const base =
    env.XDG_CONFIG_HOME && env.XDG_CONFIG_HOME !== ''
      ? env.XDG_CONFIG_HOME
      : process.platform === 'win32' && env.APPDATA
        ? env.APPDATA
        : join(homedir(), '.config');
  return join(base, 'better-compute', 'config.json');
}

export async function readConfig(path = configPath()): Promise<ConfigFile> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { contexts: {} };
    throw new CliError('USAGE', `cannot read the config file ${path}: ${(error as Error).message}`);
  }
  try {
    const parsed = JSON.parse(text) as ConfigFile;
    if (typeof parsed !== 'object' || parsed === null || typeof parsed.contexts !== 'object') throw new Error('shape');
    return parsed;
  } catch {
    throw usage(`the config file ${path} is not a better-compute config (JSON with "contexts")`);
  }
}

/** Writes the file with mode 0600 (its folder 0700): it holds tokens. Written beside and renamed, so never half. */
export async function writeConfig(config: ConfigFile, path = configPath()): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const temp = `${path}.${process.pid}.tmp`;
  await writeFile(temp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  await chmod(temp, 0o600);
  await rename(temp, path);
}

/** What every command connects with, after flags, environment and the context are merged. */
export interface Connection {
  url: string;
  token: string | undefined;
  ca: string | undefined;
  tenant: string;
  contextName: string | undefined;
}

/** The global options a command sees. */
export interface GlobalOptions {
  url?: string;
  token?: string;
  ca?: string;
  context?: string;
  tenant?: string;
  json?: boolean;
  quiet?: boolean;
  color?: boolean;
}

async function readCa(file: string, flag: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    throw usage(`cannot read the CA file ${file}: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}`, [flag]);
  }
}

/** Flags win over the environment, which wins over the context (`--context`, `BETTER_COMPUTE_CONTEXT`, else current). */
export async function resolveConnection(
  options: GlobalOptions,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Connection> {
  const config = await readConfig(configPath(env));
  const name = options.context ?? (env.BETTER_COMPUTE_CONTEXT || undefined) ?? config.current;
  const context = name ? config.contexts[name] : undefined;
  if ((options.context || env.BETTER_COMPUTE_CONTEXT) && !context) {
    throw new CliError('NOT_FOUND', `no context named ${name} (see better-compute context list)`, {
      path: ['--context'],
    });
  }
  const url = options.url ?? (env.BETTER_COMPUTE_URL || undefined) ?? context?.url;
  if (!url) {
    throw usage('no server: pass --url, set BETTER_COMPUTE_URL, or run better-compute login', ['--url']);
  }
  let ca: string | undefined;
  if (options.ca) ca = await readCa(options.ca, '--ca');
  else if (env.BETTER_COMPUTE_CA) ca = await readCa(env.BETTER_COMPUTE_CA, 'BETTER_COMPUTE_CA');
  else ca = context?.ca;
  return {
    url: normaliseUrl(url),
    token: options.token ?? (env.BETTER_COMPUTE_TOKEN || undefined) ?? context?.token,
    ca,
    tenant: options.tenant ?? (env.BETTER_COMPUTE_TENANT || undefined) ?? context?.tenant ?? 'root',
    contextName: context ? name : undefined,
  };
}

/** `https://host:8443`, `https://host:8443/` and `https://host:8443/v1` all mean the server's origin. */
export function normaliseUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw usage(`${url} is not a URL (like https://cp.example.com:8443)`, ['--url']);
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') {
    throw usage(`${url} is not an http(s) URL`, ['--url']);
  }
  const path = parsed.pathname.replace(/\/+$/, '').replace(/\/v1$/, '');
  return `${parsed.protocol}//${parsed.host}${path}`;
}
