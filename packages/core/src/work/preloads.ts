import type { Logger } from '../kernel/logger';
import type { SqlExecutor } from '../sql/executor';
import { toSqlError } from '../sql/sql-error';
import { describeFailure } from './backoff';
import type { ClaimAndNext, ClaimFilter } from './items';
import type { Reconciler } from './types';

type Build = (key: string, now: string) => string;
type BuildPark = (on: string, now: string) => string;

/**
 * The preloads and parks of a set of reconcilers (kind → SQL expression builder), as a claim uses them. Neither may
 * stop the queue when it fails: one that fails its check is dropped, and a claim that fails with them but succeeds
 * without them turns them all off for the rest of this holder's life. Either way the reconcilers read for themselves,
 * one round trip more, and parked items run their passes as if never parked.
 *
 * @example
 * ```ts
 * const preloads = new ClaimPreloads(reconcilers, log);
 * await preloads.check(db);
 * const { items } = await preloads.claim((preload) => claimDueItemsAndNext(db, { ...filter, ...preload }));
 * ```
 */
export class ClaimPreloads {
  #byKind: Map<string, Build>;
  #parks: Map<string, BuildPark>;

  constructor(
    reconcilers: ReadonlyMap<string, Reconciler>,
    private readonly log: Logger,
  ) {
    this.#byKind = new Map();
    this.#parks = new Map();
    for (const [kind, reconciler] of reconcilers) {
      const build = reconciler.preload?.sql;
      if (typeof build === 'function') this.#byKind.set(kind, build);
      const park = reconciler.park?.sql;
      if (typeof park === 'function') this.#parks.set(kind, park);
    }
  }

  /** The kinds whose claims read a preload now. */
  get kinds(): string[] {
    return [...this.#byKind.keys()];
  }

  /** The kinds whose parked items a claim looks at now. */
  get parkKinds(): string[] {
    return [...this.#parks.keys()];
  }

  /** Runs each preload once for a key that matches nothing, each park for an empty `on`, and drops those that fail. */
  async check(db: SqlExecutor): Promise<void> {
    for (const [kind, build] of this.#parks) {
      try {
        // now is selected too, so the parameter's type is known even to a park SQL that does not read it.
        await db.query(
          `SELECT $1::timestamptz AS now, (${build("'{}'::jsonb", '$1::timestamptz')}) IS TRUE AS parked`,
          [new Date()],
        );
      } catch (err) {
        this.#parks.delete(kind);
        this.log.error("a reconciler's park failed its check; that kind's items are claimed when due", {
          kind,
          error: describeFailure(toSqlError(err)),
        });
      }
    }
    for (const [kind, build] of this.#byKind) {
      try {
        // now is selected too, so the parameter's type is known even to a preload SQL that does not read it.
        await db.query(`SELECT $2::timestamptz AS now, to_json(${build('$1::text', '$2::timestamptz')}) AS preloaded`, [
          '',
          new Date(),
        ]);
      } catch (err) {
        this.#byKind.delete(kind);
        this.log.error('a reconciler preload failed its check; that kind reads for itself', {
          kind,
          error: describeFailure(toSqlError(err)),
        });
      }
    }
  }

  /**
   * Claims with the preloads and parks (`run` gets the filter part to spread); when that fails for a reason other than
   * the connection and the same claim without them succeeds, they were at fault: they are turned off.
   */
  async claim<T extends ClaimAndNext>(run: (hooks: Pick<ClaimFilter, 'preload' | 'park'>) => Promise<T>): Promise<T> {
    if (this.#byKind.size === 0 && this.#parks.size === 0) return run({});
    try {
      return await run({
        ...(this.#byKind.size > 0 ? { preload: this.#byKind } : {}),
        ...(this.#parks.size > 0 ? { park: this.#parks } : {}),
      });
    } catch (err) {
      if (toSqlError(err).retryable) throw err;
      const claimed = await run({});
      this.log.error('a claim with reconciler preloads or parks failed; both are off for this worker', {
        kinds: this.kinds,
        parkKinds: this.parkKinds,
        error: describeFailure(toSqlError(err)),
      });
      this.#byKind = new Map();
      this.#parks = new Map();
      return claimed;
    }
  }
}
