/** A signal a loop waits on until something changes (a session opened, the agent stopped). */
export interface Wake {
  wait(): Promise<void>;
  notify(): void;
}

/**
 * Makes a {@link Wake}: `wait()` resolves at the next `notify()`.
 *
 * @example
 * ```ts
 * const wake = createWake();
 * while (!session) await wake.wait();
 * ```
 */
export function createWake(): Wake {
  let waiters: (() => void)[] = [];
  return {
    wait: () => new Promise<void>((resolve) => waiters.push(resolve)),
    notify() {
      const woken = waiters;
      waiters = [];
      for (const resolve of woken) resolve();
    },
  };
}

/**
 * Resolves after `ms` of real time, or earlier at the wake's next `notify()` when one is given. The timer does not
 * keep the process alive.
 *
 * @example
 * ```ts
 * await sleep(250, wake); // a backoff that close() cuts short
 * ```
 */
export function sleep(ms: number, wake?: Wake): Promise<void> {
  const timer = new Promise<void>((resolve) => setTimeout(resolve, ms).unref());
  return wake ? Promise.race([timer, wake.wait()]) : timer;
}
