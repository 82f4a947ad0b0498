/** The pauses before a step's run is tried again after a transient database error: 250 ms doubling to 10 s. */
export const TRANSIENT_BACKOFF = Object.freeze({ baseMs: 250, maxMs: 10_000 });

// Runs that met an error and have not yet run cleanly; past this many, the oldest are forgotten (they start over at
// the base delay, which only makes them retry sooner).
const MAX_TRACKED = 10_000;

/**
 * Counts the transient database errors of each step attempt in a row, in this worker's memory, so a database that
 * stays away is asked less and less often. Losing the count (a worker restart) only starts the backoff over. The
 * count is per attempt, and it never spends one: the step's deadline is what ends a run that never gets through.
 *
 * @example
 * ```ts
 * const backoff = new TransientBackoff();
 * const ms = backoff.next(`${workflowId}:${stepId}:${attempt}`); // 125–250, then 250–500, …
 * backoff.clear(`${workflowId}:${stepId}:${attempt}`);
 * ```
 */
export class TransientBackoff {
  readonly #failures = new Map<string, number>();

  /** The pause before the next run of `key`, jittered down by up to half so retries of many steps spread out. */
  next(key: string, random: () => number = Math.random): number {
    const failures = (this.#failures.get(key) ?? 0) + 1;
    this.#failures.delete(key);
    this.#failures.set(key, failures);
    if (this.#failures.size > MAX_TRACKED) {
      const oldest = this.#failures.keys().next().value;
      if (oldest !== undefined) this.#failures.delete(oldest);
    }
    const ceiling = Math.min(TRANSIENT_BACKOFF.maxMs, TRANSIENT_BACKOFF.baseMs * 2 ** (failures - 1));
    return Math.round(ceiling * (0.5 + random() / 2));
  }

  /** The run of `key` got through (or ended): its next error starts at the base delay. */
  clear(key: string): void {
    this.#failures.delete(key);
  }
}
