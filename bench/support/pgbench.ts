import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPostgresDatabase } from '@better-compute/core/postgres';

/**
 * pgbench's single-row-insert TPS with `clients` clients for `seconds` seconds, on the same server the benchmark uses:
 * the reference for what one committed write costs there.
 */
export async function pgbenchInsertTps(url: string, clients: number, seconds: number): Promise<number> {
  const db = createPostgresDatabase({ url, max: 1 });
  await db.query('DROP TABLE IF EXISTS bench_rows');
  await db.query('CREATE TABLE bench_rows (id bigserial PRIMARY KEY, v double precision NOT NULL)');
  await db.close();
  const dir = mkdtempSync(join(tmpdir(), 'bc-pgbench-'));
  try {
    const script = join(dir, 'insert.sql');
    writeFileSync(script, 'INSERT INTO bench_rows (v) VALUES (random());\n');
    const parsed = new URL(url);
    const out = execFileSync(
      'pgbench',
      [
        '-n',
        '-f',
        script,
        '-c',
        String(clients),
        '-j',
        String(clients),
        '-T',
        String(seconds),
        '-h',
        parsed.hostname,
        '-p',
        parsed.port || '5432',
        '-U',
        decodeURIComponent(parsed.username || 'postgres'),
        parsed.pathname.slice(1),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    ).toString();
    const match = /tps = ([0-9.]+)/.exec(out);
    if (!match?.[1]) throw new Error(`pgbench printed no tps:\n${out}`);
    return Number(match[1]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
