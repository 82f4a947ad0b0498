/**
 * A sleep that a wake cuts short. A wake that comes while nobody sleeps is kept, so the next sleep returns at once: a
 * notification that arrives while the worker is busy claiming is not lost.
 *
 * @example
 * ```ts
 * const signal = new WakeSignal();
 * db.listen('work', () => signal.wake());
 * await signal.sleep(1_000); // a second, or until the next wake
 * ```
 */
export class WakeSignal {
  #woken = false;
  #wakeSleeper: (() => void) | undefined;

  /** Ends the sleep under way, or the next one before it starts. */
  wake(): void {
    const sleeper = this.#wakeSleeper;
    if (sleeper) sleeper();
    else this.#woken = true;
  }

  /** Resolves after `ms`, or at the first wake; at once if a wake came since the last sleep. */
  sleep(ms: number): Promise<void> {
    if (this.#woken) {
      this.#woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => finish(), ms);
      const finish = () => {
        clearTimeout(timer);
        this.#wakeSleeper = undefined;
        resolve();
      };
      this.#wakeSleeper = finish;
    });
  }
}
