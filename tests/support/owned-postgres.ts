import { execFile, spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A PostgreSQL server this test started in a folder of its own, on a port of its own. */
export interface OwnedPostgres {
  /** `postgres://postgres@127.0.0.1:<port>/postgres`. */
  url: string;
  /** Stops the server (`fast` ends sessions cleanly, `immediate` as a crash does) and starts it again. */
  restart(mode: 'fast' | 'immediate', downMs?: number): Promise<void>;
  /** Ends the given share of the sessions whose application is `application`, picked at random; how many it ended. */
  terminate(application: string, share: number): Promise<number>;
  /** Stops the server and removes its folder. */
  destroy(): Promise<void>;
}

/** Where the server binaries are, or why there are none. */
export function postgresBinaries(): { bin: string } | { missing: string } {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort().reverse() : [];
  for (const version of versions) {
    const bin = join(root, version, 'bin');
    if (existsSync(join(bin, 'initdb')) && existsSync(join(bin, 'pg_ctl'))) return { bin };
  }
  return { missing: `no PostgreSQL server binaries (initdb, pg_ctl) under ${root}` };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * A watcher of its own (detached, so it outlives a test process killed with SIGKILL): when the process that started
 * the server is gone, it stops the server and removes its folder, so a killed run leaves nothing behind.
 */
function watchOver(dir: string, asUser: string[], pgCtl: string, data: string): void {
  const quote = (text: string) => `'${text.replaceAll("'", "'\\''")}'`;
  const stop = [...asUser, pgCtl, '-D', data, '-m', 'immediate', '-w', 'stop'].map(quote).join(' ');
  const script = `while kill -0 ${process.pid} 2>/dev/null && [ -d ${quote(data)} ]; do sleep 1; done; ${stop} >/dev/null 2>&1; rm -rf ${quote(dir)}`;
  spawn('sh', ['-c', script], { detached: true, stdio: 'ignore' }).unref();
}

/**
 * Makes a cluster with initdb in a temporary folder and starts it on a free port. As root (CI), the server runs as
 * the `postgres` user, since PostgreSQL refuses to run as root. fsync is off: a restart (even `immediate`) loses
 * nothing the OS has, and the test is about the clients, not the disk.
 */
export async function startOwnedPostgres(bin: string): Promise<OwnedPostgres> {
  const dir = await mkdtemp(join(tmpdir(), 'bc-owned-pg-'));
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    await chown(dir, Number(stdout.trim()), Number(gid.trim()));
  }
  const pg = (tool: string, args: string[]) =>
    asRoot ? run('runuser', ['-u', 'postgres', '--', join(bin, tool), ...args]) : run(join(bin, tool), args);
  const data = join(dir, 'data');
  const port = await freePort();
  await pg('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const serverOptions = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  const start = () =>
    pg('pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-o', serverOptions, '-w', '-t', '60', 'start']);
  const stop = (mode: 'fast' | 'immediate') => pg('pg_ctl', ['-D', data, '-m', mode, '-w', '-t', '60', 'stop']);
  await start();
  watchOver(dir, asRoot ? ['runuser', '-u', 'postgres', '--'] : [], join(bin, 'pg_ctl'), data);
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const psql = join(bin, 'psql');
  const sql = async (text: string) => {
    const { stdout } = await run(existsSync(psql) ? psql : 'psql', [
      '-h',
      '127.0.0.1',
      '-p',
      String(port),
      '-U',
      'postgres',
      '-d',
      'postgres',
      '-Atc',
      text,
    ]);
    return stdout.trim();
  };
  return {
    url,
    async restart(mode, downMs = 0) {
      await stop(mode);
      if (downMs > 0) await new Promise((resolve) => setTimeout(resolve, downMs));
      await start();
    },
    async terminate(application, share) {
      const ended = await sql(
        `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '${application.replaceAll("'", "''")}' AND pid <> pg_backend_pid() AND random() < ${share}`,
      );
      return Number(ended) || 0;
    },
    async destroy() {
      await stop('immediate').catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
