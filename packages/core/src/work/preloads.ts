import type { Logger } from '../kernel/logger';
import type { SqlExecutor } from '../sql/executor';
import { toSqlError } from '../sql/sql-error';
import { describeFailure } from './backoff';
import type { ClaimAndNext, ClaimFilter } from './items';
import type { Reconciler } from './types';

type Build = (key: string) => string;

/**
 * The preloads of a set of reconcilers (kind → SQL expression builder), as a claim uses them. A preload that fails
 * must not stop the queue: one that fails its check is dropped, and a claim that fails with preloads but succeeds
 * without them turns them all off for the rest of this holder's life. Either way the reconcilers read for themselves,
 * one round trip more.
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

  constructor(
    reconcilers: ReadonlyMap<string, Reconciler>,
    private readonly log: Logger,
  ) {
    this.#byKind = new Map();
    for (const [kind, reconciler] of reconcilers) {
      const build = reconciler.preload?.sql;
      if (typeof build === 'function') this.#byKind.set(kind, build);
    }
  }

  /** The kinds whose claims read a preload now. */
  get kinds(): string[] {
    return [...this.#byKind.keys()];
  }

  /** Runs each preload once for a key that matches nothing, and drops those that fail. */
  async check(db: SqlExecutor): Promise<void> {
    for (const [kind, build] of this.#byKind) {
      try {
        await db.query(`SELECT to_json(${build('$1::text')}) AS preloaded`, ['']);
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
   * Claims with the preloads (`run` gets the filter part to spread); when that fails for a reason other than the
   * connection and the same claim without them succeeds, the preloads were at fault: they are turned off.
   */
  async claim<T extends ClaimAndNext>(run: (preload: Pick<ClaimFilter, 'preload'>) => Promise<T>): Promise<T> {
    if (this.#byKind.size === 0) return run({});
    try {
      return await run({ preload: this.#byKind });
    } catch (err) {
      if (toSqlError(err).retryable) throw err;
      const claimed = await run({});
      this.log.error('a claim with reconciler preloads failed; preloads are off for this worker', {
        kinds: this.kinds,
        error: describeFailure(toSqlError(err)),
      });
      this.#byKind = new Map();
      return claimed;
    }
  }
}
