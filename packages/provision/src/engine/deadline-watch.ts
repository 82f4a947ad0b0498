/** How often the watch looks at the running steps' deadlines while any runs. */
export const DEADLINE_TICK_MS = 100;

interface Watched {
  at: number;
  expire: () => void;
}

/**
 * One timer for the deadlines of every control-plane step running in this process, instead of a timer per run. Node
 * keeps a list per distinct timer duration until that duration has passed, even when its one timer was cleared, so a
 * timer per run (a duration of its own: the time left to a deadline up to hours away) kept a list per run for hours:
 * a heap that grew with every pass of every in-flight workflow. The watch looks every {@link DEADLINE_TICK_MS} ms
 * while something runs, and stops its timer when nothing does. Times are the process's wall clock (`Date.now()`), as
 * the timer per run counted real time.
 *
 * @example
 * ```ts
 * const unwatch = deadlines.watch(Date.now() + remaining, () => controller.abort(timeoutError));
 * try { await run(); } finally { unwatch(); }
 * ```
 */
export class DeadlineWatch {
  readonly #watched = new Set<Watched>();
  #timer: NodeJS.Timeout | undefined;

  /** Calls `expire` once the wall clock reaches `at` (at most one tick late), unless the returned function ran first. */
  watch(at: number, expire: () => void): () => void {
    const entry: Watched = { at, expire };
    this.#watched.add(entry);
    if (!this.#timer) {
      this.#timer = setInterval(() => this.#tick(), DEADLINE_TICK_MS);
      this.#timer.unref?.();
    }
    return () => this.#forget(entry);
  }

  /** How many runs it watches (for tests). */
  get size(): number {
    return this.#watched.size;
  }

  #forget(entry: Watched): void {
    this.#watched.delete(entry);
    if (this.#watched.size === 0 && this.#timer) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  #tick(): void {
    const now = Date.now();
    for (const entry of [...this.#watched]) {
      if (now < entry.at) continue;
      this.#forget(entry);
      entry.expire();
    }
  }
}

/** The process's watch, shared by every engine in it. */
export const stepDeadlines = new DeadlineWatch();
