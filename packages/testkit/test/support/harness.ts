import { betterCompute, type Compute, type ComputeModule, type SqlDatabase } from '@better-compute/core';
import { createPgliteDatabase } from '@better-compute/core/pglite';
import type { FakeClock } from '../../src';

/** One PGlite for a whole test file (startup takes seconds), emptied between tests. */
export interface SharedDatabase {
  readonly db: SqlDatabase;
  /** Builds a compute on the shared database (or on `database`, a wrapper of it); closed by `reset`. */
  compute(clock: FakeClock, modules?: readonly ComputeModule[], database?: SqlDatabase): Promise<Compute>;
  /** Closes the computes built so far and empties every kernel table but the `root` tenant. */
  reset(): Promise<void>;
  close(): Promise<void>;
}

/** Opens the file's PGlite and applies the kernel migrations once, so each test's `betterCompute` starts quickly. */
export async function sharedDatabase(): Promise<SharedDatabase> {
  const db = await createPgliteDatabase();
  await (await betterCompute({ database: db })).close();
  const open: Compute[] = [];
  return {
    db,
    async compute(clock, modules = [], database = db) {
      const compute = await betterCompute({ database, clock, modules });
      open.push(compute);
      return compute;
    },
    async reset() {
      for (const compute of open.splice(0)) await compute.close();
      await db.query(
        'TRUNCATE work_items, commands, site_boot_leases, agent_sessions, events, credentials, nodes, sites, workers, ' +
          'shard_leases',
      );
      await db.query("DELETE FROM tenants WHERE id <> 'root'");
    },
    close: () => db.close(),
  };
}

/** What `promise` rejected with; fails the test when it resolves. */
export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (err: unknown) => err,
  );
}

/** What `run` threw; fails the test when it returns. */
export function thrown(run: () => unknown): unknown {
  try {
    run();
  } catch (err) {
    return err;
  }
  throw new Error('expected a throw');
}
