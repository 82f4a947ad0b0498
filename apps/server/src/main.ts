import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ComputeError } from '@better-compute/core';
import { HelpShown, loadConfig, type ServerConfig } from './config';
import { createLogger, type ServerLogger } from './logger';
import { startServer } from './server';
import { installShutdown } from './shutdown';
import type { SimulatedSite } from './simulate';

// The entry of `pnpm start`: configuration → one clear line and exit 2 when it is wrong; else start, print the banner
// (URLs, and the admin token the first start created, on stdout and never through the logger), and wait for SIGTERM.

function describe(error: unknown): string {
  if (error instanceof ComputeError) return `${error.code}: ${error.message}`;
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

function failConfig(error: ComputeError): never {
  process.stderr.write(`better-compute-server: invalid configuration: ${error.message}\n`);
  process.exit(2);
}

function isConfigError(error: unknown): error is ComputeError {
  return error instanceof ComputeError && error.code === 'INVALID_CONFIG';
}

function databaseLabel(config: ServerConfig): string {
  if (!config.databaseUrl) return `PGlite in ${config.dataDir}/pglite`;
  // Never the URL itself: it may carry a password.
  const url = new URL(config.databaseUrl);
  return `PostgreSQL at ${url.hostname}${url.port ? `:${url.port}` : ''}${url.pathname}`;
}

async function main(): Promise<void> {
  let config: ServerConfig;
  try {
    config = loadConfig(process.env, process.argv.slice(2));
  } catch (error) {
    if (error instanceof HelpShown) process.exit(0);
    if (isConfigError(error)) failConfig(error);
    throw error;
  }
  const log: ServerLogger = createLogger(config.logLevel);
  let server: Awaited<ReturnType<typeof startServer>>;
  try {
    server = await startServer(config, log);
  } catch (error) {
    if (isConfigError(error)) failConfig(error);
    log.fatal({ err: describe(error) }, 'failed to start');
    process.stderr.write(`better-compute-server: failed to start: ${describe(error)}\n`);
    process.exit(1);
  }
  let sim: SimulatedSite | undefined;
  installShutdown({
    log,
    timeoutMs: config.shutdownTimeoutMs,
    stop: async () => {
      await sim?.close();
      await server.stop();
    },
  });

  const lines = [`better-compute control plane (role ${config.role}, ${databaseLabel(config)})`];
  if (config.role === 'worker') {
    lines.push(`  health       ${server.apiUrl}/healthz  ${server.apiUrl}/readyz  ${server.apiUrl}/metrics`);
  } else {
    lines.push(`  operator API ${server.apiUrl}/v1`);
    lines.push(`  reference    ${server.apiUrl}/v1/reference`);
    lines.push(`  events       ${server.apiUrl}/v1/events`);
    if (server.agentUrl) lines.push(`  agent API    ${server.agentUrl}/agent/v1`);
    lines.push(`  health       ${server.apiUrl}/healthz  ${server.apiUrl}/readyz  ${server.apiUrl}/metrics`);
  }
  if (server.caFile) lines.push(`  CA           ${server.caFile}  (curl --cacert ${server.caFile} …)`);
  if (server.adminToken) {
    lines.push(`  admin token  ${server.adminToken}`);
    lines.push('               (shown once: the root admin credential, every permission; store it now)');
  }
  if (config.simulate > 0 && server.agentUrl && server.caFile) {
    // Imported only here: the simulated site is the testkit's, which a server that does not simulate never loads.
    const { startSimulatedSite } = await import('./simulate');
    sim = await startSimulatedSite({
      compute: server.compute,
      ...(server.adminToken ? { adminToken: server.adminToken } : {}),
      agentUrl: server.agentUrl,
      ca: await readFile(server.caFile, 'utf8'),
      machines: config.simulate,
      enrollFile: join(config.dataDir, 'simulated-enroll.json'),
      log: (message) => log.warn({ agent: message }, 'simulated agent'),
    });
    lines.push(...sim.banner);
  } else if (config.simulate > 0) {
    lines.push("  (--simulate needs the agent API with the server's own CA: not started)");
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`better-compute-server: ${describe(error)}\n`);
  process.exit(1);
});
