/**
 * A FIFO lock for one connection: PGlite has a single session, so a transaction must own it from BEGIN to COMMIT.
 */
export class Mutex {
  #tail: Promise<void> = Promise.resolve();

  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(fn);
    this.#tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}
