import { Logger, makeWorkerUtils, run } from 'graphile-worker';
import pg from 'pg';

const silent = new Logger(() => () => undefined);

/**
 * Graphile Worker working `jobs` no-op jobs, added one per call (unbatched) before the workers start, with
 * `concurrency` workers in one runner: jobs per second from start to the last job done.
 */
export async function graphileJobsPerSecond(url: string, jobs: number, concurrency: number): Promise<number> {
  const pgPool = new pg.Pool({ connectionString: url, max: concurrency + 2 });
  // Errors from connections the server drops after the run are expected; nothing is listening for them by then.
  pgPool.on('error', () => undefined);
  const utils = await makeWorkerUtils({ pgPool, logger: silent });
  await utils.migrate();
  for (let i = 0; i < jobs; i += 1) await utils.addJob('noop', { i });
  await utils.release();
  let done = 0;
  let finish: () => void = () => undefined;
  const allDone = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const started = performance.now();
  const runner = await run({
    pgPool,
    concurrency,
    noHandleSignals: true,
    pollInterval: 1000,
    logger: silent,
    taskList: {
      noop: async () => {
        done += 1;
        if (done === jobs) finish();
      },
    },
  });
  await allDone;
  const seconds = (performance.now() - started) / 1000;
  await runner.stop();
  await pgPool.end();
  return jobs / seconds;
}
