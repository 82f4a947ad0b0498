import type { NotificationHandler, QueryResult, Row, SqlDatabase, SqlExecutor } from '@better-compute/core';

/**
 * Where a {@link crashingDatabase} kills its worker: at the `at`-th transaction boundary (1-based; a top-level
 * transaction, or a top-level statement other than a plain read, which commits on its own), either `before-commit`
 * (the transaction's work is done, then the worker dies and it rolls back; a lone statement never runs) or
 * `after-commit` (it commits, then the worker dies before it can act on the outcome).
 *
 * @example
 * ```ts
 * const plan: CrashPlan = { at: 3, when: 'before-commit' };
 * ```
 */
export interface CrashPlan {
  at: number;
  when: 'before-commit' | 'after-commit';
}

/**
 * A database handle that dies at a planned transaction boundary. `boundaries` counts the top-level transactions begun
 * through it so far; `crashed` says whether it has died.
 *
 * @example
 * ```ts
 * const crashing: CrashingDatabase = crashingDatabase(db, { at: 2, when: 'after-commit' });
 * crashing.crashed; // false, until the second transaction
 * ```
 */
export interface CrashingDatabase extends SqlDatabase {
  readonly crashed: boolean;
  readonly boundaries: number;
}

/**
 * What a crashed worker's database calls throw: the worker is dead. `boundary` is the transaction it died at.
 *
 * @example
 * ```ts
 * await expect(worker.runDueWork()).rejects.toBeInstanceOf(WorkerCrashed);
 * ```
 */
export class WorkerCrashed extends Error {
  override readonly name = 'WorkerCrashed';
  readonly boundary: number;

  constructor(boundary: number, message = `the worker crashed at transaction boundary ${boundary}`, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.boundary = boundary;
  }
}

/**
 * Whether a value is a {@link WorkerCrashed} (by class or by name, so it works across copies of the package).
 *
 * @example
 * ```ts
 * try { await worker.runDueWork(); } catch (err) { if (!isWorkerCrashed(err)) throw err; }
 * ```
 */
export function isWorkerCrashed(value: unknown): value is WorkerCrashed {
  return value instanceof WorkerCrashed || (value instanceof Error && value.name === 'WorkerCrashed');
}

/**
 * Whether a statement sent outside a transaction commits on its own: anything but a plain read (`SELECT`, `SHOW`,
 * `LISTEN`, `UNLISTEN`). {@link crashingDatabase} counts such a statement as a transaction boundary.
 *
 * @example
 * ```ts
 * commitsOnItsOwn('UPDATE work_items SET …'); // true
 * commitsOnItsOwn('SELECT 1'); // false
 * ```
 */
export function commitsOnItsOwn(text: string): boolean {
  return !/^\s*(SELECT|SHOW|LISTEN|UNLISTEN)\b/i.test(text);
}

function checkPlan(plan: CrashPlan | undefined): void {
  if (plan === undefined) return;
  if (!Number.isInteger(plan.at) || plan.at < 1) throw new Error('crashingDatabase: plan.at must be an integer ≥ 1');
  if (plan.when !== 'before-commit' && plan.when !== 'after-commit') {
    throw new Error("crashingDatabase: plan.when must be 'before-commit' or 'after-commit'");
  }
}

/**
 * Wraps `db` to inject a worker crash at a transaction boundary. It counts top-level `transaction()` calls and
 * top-level statements that are not plain reads (`SELECT`, `SHOW`), since each of those commits on its own (1-based;
 * nested `tx.transaction` savepoints and statements inside a transaction pass through uncounted). At boundary
 * `plan.at`:
 *
 * - `before-commit`: runs `fn`, then throws {@link WorkerCrashed}, so the underlying transaction rolls back;
 * - `after-commit`: lets `fn` run and commit, then throws `WorkerCrashed`.
 *
 * Either way the worker is dead from then on, even when `fn` itself threw: every `query`, `transaction` and `listen`
 * on the wrapper and on every transaction handle it handed out throws `WorkerCrashed`, so it writes nothing more, and
 * notifications are no longer delivered to it. `close()` does nothing: the underlying database lives on for the fresh
 * worker. With `plan` undefined it only counts, to learn how many boundaries a run has.
 *
 * The count starts at the wrapper's creation, so `betterCompute({ database: crashing })` counts its own startup
 * transactions (migrations, module init) too: read `boundaries` after building it to know where the run starts.
 *
 * @example
 * ```ts
 * const db = await createPgliteDatabase();
 * const crashing = crashingDatabase(db, { at: 5, when: 'before-commit' });
 * const crashingWorker = await betterCompute({ database: crashing, clock, modules }); // the worker that dies
 * await expect(settle(crashingWorker, { clock })).rejects.toSatisfy(isWorkerCrashed);
 * const freshWorker = await betterCompute({ database: db, clock, modules }); // same PGlite, takes over
 * await settle(freshWorker, { clock });
 * ```
 */
export function crashingDatabase(db: SqlDatabase, plan: CrashPlan | undefined): CrashingDatabase {
  checkPlan(plan);
  let boundaries = 0;
  let crashedAt: number | undefined;

  const dead = () =>
    new WorkerCrashed(crashedAt ?? 0, `the worker is dead: it crashed at transaction boundary ${crashedAt}`);
  const alive = () => {
    if (crashedAt !== undefined) throw dead();
  };
  const crash = (boundary: number, cause?: unknown): WorkerCrashed => {
    crashedAt ??= boundary;
    const when =
      cause !== undefined ? 'at' : plan?.when === 'after-commit' ? 'after the commit of' : 'before the commit of';
    const failed = cause !== undefined ? ' (its transaction had failed; see cause)' : '';
    return new WorkerCrashed(boundary, `the worker crashed ${when} transaction boundary ${boundary}${failed}`, cause);
  };

  const wrap = (tx: SqlExecutor): SqlExecutor => ({
    async query<R = Row>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
      alive();
      return tx.query<R>(text, params);
    },
    async transaction<T>(fn: (inner: SqlExecutor) => Promise<T>): Promise<T> {
      alive();
      return tx.transaction((inner) => {
        alive();
        return fn(wrap(inner));
      });
    },
  });

  return {
    get backend() {
      return db.backend;
    },
    get crashed() {
      return crashedAt !== undefined;
    },
    get boundaries() {
      return boundaries;
    },
    async query<R = Row>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
      alive();
      if (!commitsOnItsOwn(text)) return db.query<R>(text, params);
      boundaries += 1;
      const boundary = boundaries;
      if (plan === undefined || boundary !== plan.at) return db.query<R>(text, params);
      // Before the commit of a statement that is its own transaction: it never ran.
      if (plan.when === 'before-commit') throw crash(boundary);
      let failure: unknown;
      try {
        await db.query<R>(text, params);
      } catch (err) {
        failure = err;
      }
      throw crash(boundary, failure);
    },
    async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
      alive();
      boundaries += 1;
      const boundary = boundaries;
      if (plan === undefined || boundary !== plan.at) {
        return db.transaction((tx) => {
          alive();
          return fn(wrap(tx));
        });
      }
      let failure: unknown;
      try {
        await db.transaction(async (tx) => {
          await fn(wrap(tx));
          // Before the commit: dying here rolls the transaction back.
          if (plan.when === 'before-commit') throw crash(boundary);
        });
      } catch (err) {
        failure = err;
      }
      if (crashedAt === boundary && isWorkerCrashed(failure) && failure.boundary === boundary) throw failure;
      // After the commit (or after fn threw on its own): the worker dies all the same.
      throw crash(boundary, failure);
    },
    async listen(channel: string, handler: NotificationHandler, onListen?: () => void): Promise<() => Promise<void>> {
      alive();
      return db.listen(
        channel,
        (payload) => {
          if (crashedAt === undefined) handler(payload);
        },
        onListen,
      );
    },
    async close(): Promise<void> {},
  };
}
