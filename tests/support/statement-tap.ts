import type { QueryResult, SqlDatabase } from 'better-compute/core';

/** What a test taps of the statements a compute sends through {@link tappedDatabase}. */
export interface StatementTap {
  /** Every statement sent while the test records (undefined: not recording). */
  recorded: string[] | undefined;
  /**
   * Run once right after the next statement matching `pattern` (and `when`, given its rows) answered: someone else's
   * write landing between two statements of the engine. Cleared when it ran.
   */
  after:
    | { pattern: RegExp; when?: (rows: readonly Record<string, unknown>[]) => boolean; run: () => Promise<void> }
    | undefined;
}

/**
 * `db` with its statements tapped: recorded into `tap.recorded` (those in transactions too with `inTransactions`),
 * and `tap.after` run after the statement it names.
 *
 * @example
 * ```ts
 * const tap: StatementTap = { recorded: undefined, after: undefined };
 * const compute = await betterCompute({ database: tappedDatabase(scratch.db, tap), modules });
 * ```
 */
export function tappedDatabase(
  db: SqlDatabase,
  tap: StatementTap,
  options: { inTransactions?: boolean } = {},
): SqlDatabase {
  return {
    get backend() {
      return db.backend;
    },
    async query<R = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
      tap.recorded?.push(text);
      const result = await db.query<R>(text, params);
      const hook = tap.after;
      if (hook?.pattern.test(text) && (hook.when?.(result.rows as Record<string, unknown>[]) ?? true)) {
        tap.after = undefined;
        await hook.run();
      }
      return result;
    },
    transaction: options.inTransactions
      ? (fn) =>
          db.transaction((tx) =>
            fn({
              query: async (text, params) => {
                tap.recorded?.push(text);
                return tx.query(text, params);
              },
              transaction: (inner) => tx.transaction(inner),
            }),
          )
      : (fn) => db.transaction(fn),
    listen: (channel, handler, onListen) => db.listen(channel, handler, onListen),
    close: () => db.close(),
  };
}
