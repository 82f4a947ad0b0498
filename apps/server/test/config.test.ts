import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ComputeError } from '@better-compute/core';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config';
import { SERVER_DIR, spawnServer } from './support/server-process';

// Configuration from the environment and flags: defaults, a flag winning over its variable, and every bad value
// refused as INVALID_CONFIG naming its variable; the process prints one line and exits 2.

function refusal(env: Record<string, string>, argv: string[] = []): { path: unknown; message: string } {
  try {
    loadConfig(env, argv, SERVER_DIR);
  } catch (error) {
    expect(error).toBeInstanceOf(ComputeError);
    const computeError = error as ComputeError;
    expect(computeError.code).toBe('INVALID_CONFIG');
    return { path: (computeError.details as { path: unknown }).path, message: computeError.message };
  }
  throw new Error('the configuration was accepted');
}

describe('loadConfig', () => {
  it('has a default for everything and lets a flag win over its variable', () => {
    const config = loadConfig({}, [], '/srv/cp');
    expect(config).toMatchObject({
      role: 'all',
      databaseUrl: undefined,
      dataDir: '/srv/cp/data',
      keyFile: '/srv/cp/data/secret.key',
      port: 8443,
      agentPort: 8444,
      logLevel: 'info',
      workers: 1,
      shards: 64,
      corsOrigins: [],
      maxBodyBytes: 1024 * 1024,
      shutdownTimeoutMs: 30_000,
      tls: { enabled: true, certFile: undefined },
    });
    const flagged = loadConfig(
      { PORT: '9000', ROLE: 'api' },
      ['--port', '9100', '--role', 'worker', '--tls', 'off'],
      '/',
    );
    expect(flagged).toMatchObject({ port: 9100, role: 'worker', tls: { enabled: false } });
  });

  it.each([
    [{ PORT: 'abc' }, 'PORT'],
    [{ PORT: '70000' }, 'PORT'],
    [{ AGENT_PORT: '-1' }, 'AGENT_PORT'],
    [{ PORT: '9000', AGENT_PORT: '9000' }, 'AGENT_PORT'],
    [{ ROLE: 'everything' }, 'ROLE'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ DATABASE_URL: 'mysql://db/x' }, 'DATABASE_URL'],
    [{ DATABASE_URL: 'not a url' }, 'DATABASE_URL'],
    [{ BETTER_COMPUTE_SECRET_KEY: 'too-short' }, 'BETTER_COMPUTE_SECRET_KEY'],
    [{ TLS: 'maybe' }, 'TLS'],
    [{ TLS_CERT: '/nonexistent/server.crt', TLS_KEY: '/nonexistent/server.key' }, 'TLS_CERT'],
    [{ TLS_CERT: join(SERVER_DIR, 'package.json') }, 'TLS_KEY'],
    [{ TLS_HOSTNAMES: 'ok.example,bad name' }, 'TLS_HOSTNAMES'],
    [{ WORKERS: '0' }, 'WORKERS'],
    [{ SHARDS: '5000' }, 'SHARDS'],
    [{ BETTER_COMPUTE_CONFIG: './missing.config.ts' }, 'BETTER_COMPUTE_CONFIG'],
    [{ BETTER_COMPUTE_ADMIN_TOKEN: 'hunter2' }, 'BETTER_COMPUTE_ADMIN_TOKEN'],
    [{ METRICS_TOKEN: 'short-token' }, 'METRICS_TOKEN'],
    [{ METRICS_TOKEN: 'a token with spaces in it, long enough' }, 'METRICS_TOKEN'],
    [{ BETTER_COMPUTE_QUORUM: '{"approvers":' }, 'BETTER_COMPUTE_QUORUM'],
    [{ BETTER_COMPUTE_QUORUM: '{"approvers":[],"threshold":0}' }, 'BETTER_COMPUTE_QUORUM'],
    [{ CORS_ORIGINS: 'https://ok.example,not-an-origin' }, 'CORS_ORIGINS'],
    [{ MAX_BODY_BYTES: '99999999' }, 'MAX_BODY_BYTES'],
    [{ SHUTDOWN_TIMEOUT_MS: 'soon' }, 'SHUTDOWN_TIMEOUT_MS'],
  ])('refuses %o naming %s, without repeating the value', (env, variable) => {
    const { path, message } = refusal(env);
    expect(path).toEqual([variable]);
    expect(message.startsWith(`${variable} `)).toBe(true);
    for (const value of Object.values(env)) if (value.length > 4) expect(message).not.toContain(value);
  });

  it('refuses an unknown flag', () => {
    expect(refusal({}, ['--colour', 'blue']).path).toEqual(['argv']);
  });
});

describe('the process', () => {
  it('prints one line naming the bad variable and exits 2, with no stack trace', async () => {
    const cases: { env: Record<string, string>; variable: string }[] = [
      { env: { PORT: 'eighty' }, variable: 'PORT' },
      {
        env: { BETTER_COMPUTE_CONFIG: join(SERVER_DIR, 'test/fixtures/bad.config.ts') },
        variable: 'BETTER_COMPUTE_CONFIG',
      },
    ];
    const runs = cases.map(async ({ env, variable }) => {
      const spawned = spawnServer({ DATA_DIR: join(SERVER_DIR, 'build/never-created'), ...env });
      const code = await spawned.exited;
      return { code, variable, stderr: spawned.stderr(), stdout: spawned.stdout() };
    });
    for (const run of await Promise.all(runs)) {
      expect(run.code, run.stderr).toBe(2);
      const lines = run.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(new RegExp(`^better-compute-server: invalid configuration: ${run.variable} `));
      expect(run.stderr).not.toMatch(/^\s+at /m);
      expect(run.stdout).toBe('');
    }
    expect(existsSync(join(SERVER_DIR, 'build/never-created'))).toBe(false);
  });
});
