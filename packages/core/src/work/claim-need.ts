/**
 * What a worker knows of its shards between claims, so it claims only when a claim may find something: on a quiet
 * shard the claim statement after every pass would be most of the worker's load and find nothing.
 *
 * - A claim is *wanted* when something may be due whose time the worker does not know: a notification, a new lease,
 *   an item that was notified while it ran (the claim skipped its key), a failed claim or a failed record.
 * - Items whose time it knows fall due at {@link ClaimNeed.knownDueAt}: the claim's `next_due`, and the requeue times
 *   of the passes that finished since.
 * - Whatever it knows, a claim runs at least every `pollMs`, for notifications lost with a dropped connection; and a
 *   worker that does not listen claims whenever it can, as it cannot know.
 *
 * @example
 * ```ts
 * const need = new ClaimNeed(1_000);
 * need.listening = true;
 * need.claimStarted();
 * need.noteDue(nextDueAt);
 * if (need.mayFind(clock.now())) await claim();
 * ```
 */
export class ClaimNeed {
  listening = false;
  #wanted = true;
  #knownDueAt: number | undefined;
  #lastClaimAt = Number.NEGATIVE_INFINITY; // performance.now(), so the poll floor holds under a fake Clock too

  constructor(private readonly pollMs: number) {}

  /** The earliest time (ms since the epoch, by the worker's Clock) an item it knows of falls due. */
  get knownDueAt(): number | undefined {
    return this.#knownDueAt;
  }

  /** Something may be due that the worker does not know the time of. */
  want(): void {
    this.#wanted = true;
  }

  /** An item falls due at `at`. */
  noteDue(at: Date): void {
    const ms = at.getTime();
    if (this.#knownDueAt === undefined || ms < this.#knownDueAt) this.#knownDueAt = ms;
  }

  /**
   * A claim is starting: what it will see no longer needs wanting. Its `next_due` replaces the known time, merged with
   * the requeues noted while it runs (they may be missing from its snapshot).
   */
  claimStarted(): void {
    this.#wanted = false;
    this.#lastClaimAt = performance.now();
    this.#knownDueAt = undefined;
  }

  /** Whether a claim at `now` may find an item. */
  mayFind(now: Date): boolean {
    if (!this.listening || this.#wanted) return true;
    return this.msUntilClaim(now) === 0;
  }

  /**
   * How long until a claim may find something without being wanted: the known due time or the poll floor, whichever
   * comes first, in whole ms (0 when one has passed). Not held to a minimum sleep: a timer may fire a millisecond
   * early, and the worker then sleeps the rest rather than claiming too soon.
   */
  msUntilClaim(now: Date): number {
    const floor = Math.max(0, this.pollMs - (performance.now() - this.#lastClaimAt));
    const due = this.#knownDueAt === undefined ? floor : Math.max(0, this.#knownDueAt - now.getTime());
    return Math.ceil(Math.min(floor, due));
  }
}
