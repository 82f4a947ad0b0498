import { ulid } from '@better-compute/core';
import { createPostgresDatabase } from '@better-compute/core/postgres';

/** A fresh database on the benchmark server, dropped by `drop()`. */
export async function createBenchDatabase(baseUrl: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `bc_bench_${ulid()}`;
  const admin = createPostgresDatabase({ url: baseUrl, max: 1 });
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.close();
    },
  };
}
