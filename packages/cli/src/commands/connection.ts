import { readFile } from 'node:fs/promises';
import { ApiClient } from '../client';
import { type ConfigFile, type ContextEntry, configPath, normaliseUrl, readConfig, writeConfig } from '../config';
import { CliError, usage } from '../errors';
import { keyValues, table } from '../output';
import type { Handler } from '../runtime';

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** `login`: checks the server (reachable, API version) and the token, then saves the context (0600) and makes it current. */
export const login: Handler = async (rt, _args, opts) => {
  const { globals, out } = rt;
  const path = configPath();
  const config = await readConfig(path);
  const name = (opts.name as string | undefined) ?? globals.context ?? 'default';
  const existing = config.contexts[name];
  const url = globals.url ?? (process.env.BETTER_COMPUTE_URL || undefined) ?? existing?.url;
  if (!url) throw usage('login needs --url (or BETTER_COMPUTE_URL)', ['--url']);
  let token = globals.token ?? (process.env.BETTER_COMPUTE_TOKEN || undefined);
  if (!token && !process.stdin.isTTY) token = (await readStdin()).trim() || undefined;
  token ??= existing?.token;
  if (!token) throw usage('login needs a token: --token, BETTER_COMPUTE_TOKEN, or the token on stdin', ['--token']);
  let ca = existing?.ca;
  const caFile = globals.ca ?? (process.env.BETTER_COMPUTE_CA || undefined);
  if (caFile) {
    try {
      ca = await readFile(caFile, 'utf8');
    } catch (error) {
      throw usage(`cannot read the CA file ${caFile}: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}`, [
        '--ca',
      ]);
    }
    if (!ca.includes('-----BEGIN CERTIFICATE-----')) throw usage(`${caFile} holds no PEM certificate`, ['--ca']);
  }
  const tenant = globals.tenant ?? (process.env.BETTER_COMPUTE_TENANT || undefined) ?? existing?.tenant ?? 'root';
  const entry: ContextEntry = { url: normaliseUrl(url), token, tenant, ...(ca ? { ca } : {}) };
  const client = new ApiClient({ url: entry.url, token, tenant, ca, contextName: name });
  try {
    await client.call('sites.list', { limit: 1 });
  } catch (error) {
    // A valid token without sites:read is still a valid token.
    if (!(error instanceof CliError && error.code === 'PERMISSION_DENIED')) throw error;
  }
  const next: ConfigFile = { ...config, current: name, contexts: { ...config.contexts, [name]: entry } };
  await writeConfig(next, path);
  if (out.json) out.printJson({ context: name, url: entry.url, tenant, configPath: path });
  else if (!out.quiet) out.out(`logged in to ${entry.url} as context ${name} (tenant ${tenant}); saved in ${path}`);
  return 0;
};

export const contextList: Handler = async (rt) => {
  const config = await readConfig();
  const names = Object.keys(config.contexts).sort();
  if (rt.out.json) {
    rt.out.printJson({
      current: config.current ?? null,
      contexts: names.map((name) => describe(name, config.contexts[name] as ContextEntry)),
    });
  } else if (rt.out.quiet) {
    for (const name of names) rt.out.out(name);
  } else if (names.length === 0) {
    rt.out.out('no contexts (better-compute login --url … --token … creates one)');
  } else {
    const rows = names.map((name) => {
      const entry = config.contexts[name] as ContextEntry;
      return [name === config.current ? '*' : '', name, entry.url, entry.tenant, entry.ca ? 'yes' : 'no'];
    });
    rt.out.out(table(['current', 'name', 'url', 'tenant', 'ca'], rows, rt.out.c));
  }
  return 0;
};

function describe(name: string, entry: ContextEntry) {
  return { name, url: entry.url, tenant: entry.tenant, hasToken: Boolean(entry.token), hasCa: Boolean(entry.ca) };
}

function need(config: ConfigFile, name: string): ContextEntry {
  const entry = config.contexts[name];
  if (!entry)
    throw new CliError('NOT_FOUND', `no context named ${name} (see better-compute context list)`, { path: ['name'] });
  return entry;
}

export const contextUse: Handler = async (rt, args) => {
  const name = args[0] as string;
  const config = await readConfig();
  need(config, name);
  await writeConfig({ ...config, current: name });
  if (rt.out.json) rt.out.printJson({ current: name });
  else if (!rt.out.quiet) rt.out.out(`using context ${name}`);
  return 0;
};

export const contextShow: Handler = async (rt, args) => {
  const config = await readConfig();
  const name = (args[0] as string | undefined) ?? rt.globals.context ?? config.current;
  if (!name) throw new CliError('NOT_FOUND', 'no current context (better-compute login creates one)');
  const entry = need(config, name);
  const view = { ...describe(name, entry), current: name === config.current };
  if (rt.out.json) rt.out.printJson(view);
  else if (rt.out.quiet) rt.out.out(name);
  else {
    rt.out.out(
      keyValues(
        [
          ['name', name],
          ['url', entry.url],
          ['tenant', entry.tenant],
          ['token', entry.token ? 'stored (never printed)' : 'none'],
          ['ca', entry.ca ? 'stored' : 'none (the system’s CAs)'],
          ['current', view.current ? 'yes' : 'no'],
        ],
        rt.out.c,
      ),
    );
  }
  return 0;
};

export const contextDelete: Handler = async (rt, args) => {
  const name = args[0] as string;
  const config = await readConfig();
  need(config, name);
  const { [name]: _removed, ...contexts } = config.contexts;
  const next: ConfigFile = { contexts };
  if (config.current !== name && config.current) next.current = config.current;
  await writeConfig(next);
  if (rt.out.json) rt.out.printJson({ deleted: name });
  else if (!rt.out.quiet) rt.out.out(`deleted context ${name}`);
  return 0;
};
