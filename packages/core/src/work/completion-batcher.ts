import type { Clock } from '../clock';
import type { SqlExecutor } from '../sql/executor';
import type { ShardLease } from './fenced-executor';
import { type BatchOutcome, finishBatch, type LeasedItem } from './finish';
import type { ClaimedItem } from './items';
import type { CheckedPark } from './park';

interface Waiting extends LeasedItem {
  resolve: (outcome: BatchOutcome) => void;
  reject: (err: unknown) => void;
}

// Large enough that a busy worker's completions rarely wait for a second flush, small enough to keep the arrays of
// one statement modest.
const MAX_BATCH = 256;

/**
 * Collects the `done` and `requeued` completions of one worker and records those that finished close together with
 * one statement ({@link finishBatch}): a flush starts as soon as none is under way, and everything that finishes meanwhile goes
 * into the next. So an idle worker records an item at once, and a busy one sends one statement for many items.
 *
 * @example
 * ```ts
 * const batcher = new CompletionBatcher(db, clock);
 * const outcome = await batcher.record(item, { workerId, shard: item.shard, epoch });
 * ```
 */
export class CompletionBatcher {
  #waiting: Waiting[] = [];
  #flushing = false;

  constructor(
    private readonly db: SqlExecutor,
    private readonly clock: Clock,
  ) {}

  /**
   * Queues `item` as done (or, with `requeueAt`, as due again then, parked as `park` says) under `lease`, and resolves
   * once it is recorded (or found fenced).
   */
  record(item: ClaimedItem, lease: ShardLease, requeueAt?: Date, park?: CheckedPark): Promise<BatchOutcome> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({
        item,
        lease,
        ...(requeueAt ? { requeueAt, ...(park ? { park } : {}) } : {}),
        resolve,
        reject,
      });
      if (!this.#flushing) {
        this.#flushing = true;
        // Let the completions of the same turn of the event loop join the first statement.
        setImmediate(() => void this.#flush());
      }
    });
  }

  async #flush(): Promise<void> {
    while (this.#waiting.length > 0) {
      const batch = this.#waiting.splice(0, MAX_BATCH);
      try {
        const outcomes = await finishBatch(this.db, batch, this.clock.now());
        batch.forEach((w, i) => {
          w.resolve(outcomes[i] ?? 'fenced');
        });
      } catch (err) {
        for (const w of batch) w.reject(err);
      }
    }
    this.#flushing = false;
  }
}
