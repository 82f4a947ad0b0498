import { createScratchDatabase } from '@better-compute/testkit';

/**
 * A fresh database on the benchmark server, dropped by `drop()`: the testkit's scratch database, of which the bench
 * uses the URL only (it opens its own pools, sized for each scenario).
 *
 * @example
 * ```ts
 * const scratch = await createBenchDatabase('postgres://postgres@127.0.0.1:5432/test');
 * const db = createPostgresDatabase({ url: scratch.url, max: 36 });
 * ```
 */
export async function createBenchDatabase(baseUrl: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const scratch = await createScratchDatabase({ url: baseUrl });
  return { url: scratch.url ?? '', drop: () => scratch.drop() };
}
