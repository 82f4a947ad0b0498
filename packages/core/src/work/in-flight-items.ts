interface InFlight {
  shard: number;
  urgent: boolean;
  /** A notification for its shard arrived while it ran. */
  notified: boolean;
  /** One of those was urgent (a result its workflow waits on): it is claimed for again at once once it finishes. */
  notifiedUrgently: boolean;
  done: Promise<void>;
}

/**
 * The items a worker is running, by key. The claim skips their keys, so a notification for the shard of one that is
 * running may be for it: such an item is marked, and claimed for again once it finishes.
 *
 * @example
 * ```ts
 * const running = new InFlightItems();
 * running.add(item, done);
 * running.noteNotified(item.shard, true);
 * const urgent = running.notifiedUrgently(item.key);
 * if (running.remove(item.key)) need.want(); // notified while it ran
 * ```
 */
export class InFlightItems {
  readonly #byKey = new Map<string, InFlight>();

  get size(): number {
    return this.#byKey.size;
  }

  /** The keys running, for the claim to skip. */
  keys(): string[] {
    return [...this.#byKey.keys()];
  }

  /** Until every item running now has finished. Never rejects. */
  async drained(): Promise<void> {
    await Promise.allSettled([...this.#byKey.values()].map((entry) => entry.done));
  }

  add(item: { key: string; shard: number; urgent: boolean }, done: Promise<void>): void {
    this.#byKey.set(item.key, {
      shard: item.shard,
      urgent: item.urgent,
      notified: false,
      notifiedUrgently: false,
      done,
    });
  }

  /** Forgets a finished item; true when a notification for its shard came while it ran. */
  remove(key: string): boolean {
    const notified = this.#byKey.get(key)?.notified ?? false;
    this.#byKey.delete(key);
    return notified;
  }

  /** Whether an urgent notification for its shard came while the item ran (before {@link remove}). */
  notifiedUrgently(key: string): boolean {
    return this.#byKey.get(key)?.notifiedUrgently ?? false;
  }

  /** A notification for `shard` came (urgent or not): it may be for an item of it that is running. */
  noteNotified(shard: number, urgent = false): void {
    for (const entry of this.#byKey.values()) {
      if (entry.shard !== shard) continue;
      entry.notified = true;
      if (urgent) entry.notifiedUrgently = true;
    }
  }

  /** Whether an item of `shard` is running. */
  isBusy(shard: number): boolean {
    for (const entry of this.#byKey.values()) if (entry.shard === shard) return true;
    return false;
  }

  /** How many of the items running are routine (not urgent). */
  routineCount(): number {
    let n = 0;
    for (const entry of this.#byKey.values()) if (!entry.urgent) n += 1;
    return n;
  }
}
