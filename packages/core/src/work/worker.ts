import { setMaxListeners } from 'node:events';
import { addMs } from '../clock';
import { describeFailure } from './backoff';
import { ClaimNeed } from './claim-need';
import { claimRoom } from './claim-room';
import { CompletionBatcher } from './completion-batcher';
import { FencedExecutor } from './fenced-executor';
import { InFlightItems } from './in-flight-items';
import { type ClaimedItem, claimDueItemsAndNext } from './items';
import { announceRebalance, earliestDue, heartbeat, markStopped, pruneWorkers } from './leases';
import { ClaimPreloads } from './preloads';
import { type DoneOrRequeued, processItem } from './process-item';
import { ShardHolder } from './shard-holder';
import { parseWorkNotification, REBALANCE_PAYLOAD, WORK_CHANNEL, type WorkOutcome } from './types';
import { WakeSignal } from './wake-signal';
import { type ResolvedWorkerOptions, resolveWorkerOptions, type WorkerOptions } from './worker-options';

/** What a worker has done so far, for metrics, tests and benchmarks. */
export interface WorkerStats {
  workerId: string;
  /** Items handled, whatever the outcome. */
  processed: number;
  byOutcome: Record<WorkOutcome, number>;
  inFlight: number;
  /** The shards it holds leases on, ascending. */
  shards: number[];
}

/** A running worker. */
export interface WorkerHandle {
  readonly id: string;
  /** Stops claiming, finishes the items in flight, releases every lease and marks the worker stopped. Idempotent. */
  stop(): Promise<void>;
  stats(): WorkerStats;
}

// The shortest idle sleep, so an item that is due but locked by another transaction is not polled in a tight loop.
const MIN_SLEEP_MS = 10;
const PRUNE_AFTER_MS = 3_600_000;

class Worker implements WorkerHandle {
  readonly id: string;
  readonly #o: ResolvedWorkerOptions;
  readonly #completions: CompletionBatcher;
  readonly #preloads: ClaimPreloads;
  readonly #shards: ShardHolder;
  readonly #inFlight = new InFlightItems();
  // An urgent wake arrived since the last claim: claim at once if a slot is free, not only once half of them are.
  #urgentWake = false;
  // Claims only when a claim may find something, not after every pass.
  readonly #need: ClaimNeed;
  readonly #outcomes: Record<WorkOutcome, number> = { done: 0, requeued: 0, failed: 0, fenced: 0 };
  #stopping = false;
  // Reconcilers see it as ctx.signal, so long work (a workflow step) can end early when the worker stops.
  readonly #stopSignal = new AbortController();
  #halted = false;
  readonly #signal = new WakeSignal();
  #heartbeatTimer: NodeJS.Timeout | undefined;
  #tickRunning: Promise<void> | undefined;
  #tickAgain = false;
  #loopDone: Promise<void> = Promise.resolve();
  #unlisten: (() => Promise<void>) | undefined;
  #stopped: Promise<void> | undefined;

  constructor(options: ResolvedWorkerOptions) {
    // Every item in flight may listen on the stop signal (a step run does, until it ends): as many listeners as the
    // worker's concurrency, each removed when its item ends, which is no leak for Node to warn about.
    setMaxListeners(0, this.#stopSignal.signal);
    this.#o = options;
    this.id = options.workerId;
    this.#completions = new CompletionBatcher(options.db, options.clock);
    this.#preloads = new ClaimPreloads(options.reconcilers, options.log);
    this.#shards = new ShardHolder(options);
    this.#need = new ClaimNeed(options.pollMs);
  }

  async start(): Promise<void> {
    const { db, clock, log } = this.#o;
    const now = clock.now();
    await heartbeat(db, this.id, now);
    await pruneWorkers(db, addMs(now, -Math.max(this.#o.leaseMs * 10, PRUNE_AFTER_MS)), this.id);
    await this.#preloads.check(db);
    try {
      this.#unlisten = await db.listen(WORK_CHANNEL, (payload) => this.#onNotification(payload));
      this.#need.listening = true;
    } catch (err) {
      log.warn('work notifications unavailable; polling only', { workerId: this.id, error: describeFailure(err) });
    }
    // The others make room for this worker now, not at their next heartbeat.
    await announceRebalance(db);
    await this.#tick();
    this.#scheduleHeartbeat();
    this.#loopDone = this.#loop();
  }

  stop(): Promise<void> {
    this.#stopped ??= this.#shutdown();
    return this.#stopped;
  }

  stats(): WorkerStats {
    const byOutcome = { ...this.#outcomes };
    const processed = byOutcome.done + byOutcome.requeued + byOutcome.failed + byOutcome.fenced;
    return { workerId: this.id, processed, byOutcome, inFlight: this.#inFlight.size, shards: this.#shards.held() };
  }

  async #shutdown(): Promise<void> {
    const { db, clock, log } = this.#o;
    this.#stopping = true;
    this.#stopSignal.abort();
    this.#wake();
    await this.#loopDone;
    // Leaving the live set first lets the other workers rebalance while the items in flight finish; leases keep
    // being renewed until then, and each idle shard is released as soon as it drains.
    await markStopped(db, this.id, clock.now()).catch((err) => this.#warn('marking the worker stopped failed', err));
    void this.#tick();
    await this.#inFlight.drained();
    this.#halted = true;
    clearTimeout(this.#heartbeatTimer);
    await this.#tickRunning;
    await this.#shards.releaseAll().catch((err) => this.#warn('releasing leases failed', err));
    await this.#unlisten?.().catch(() => undefined);
    log.info('worker stopped', { workerId: this.id });
  }

  #warn(message: string, err: unknown): void {
    this.#o.log.warn(message, { workerId: this.id, error: describeFailure(err) });
  }

  #scheduleHeartbeat(): void {
    if (this.#halted) return;
    this.#heartbeatTimer = setTimeout(() => {
      void this.#tick().then(() => this.#scheduleHeartbeat());
    }, this.#o.heartbeatMs);
  }

  #onNotification(payload: string): void {
    if (payload === REBALANCE_PAYLOAD) {
      if (!this.#halted) void this.#tick();
      return;
    }
    const notification = parseWorkNotification(payload);
    if (!notification || !this.#shards.isClaimable(notification.shard)) return;
    if (notification.urgent) this.#urgentWake = true;
    this.#need.want();
    // The notification names the shard only: it may be for an item of it that is running (see InFlightItems).
    this.#inFlight.noteNotified(notification.shard, notification.urgent);
    this.#wake();
  }

  /** Runs a rebalance now, or once more after the one under way. Never throws. */
  #tick(): Promise<void> {
    if (this.#tickRunning) {
      this.#tickAgain = true;
      return this.#tickRunning;
    }
    this.#tickRunning = (async () => {
      try {
        do {
          this.#tickAgain = false;
          const acquired = await this.#shards.rebalance({
            isStopping: () => this.#stopping,
            isBusy: (shard) => this.#inFlight.isBusy(shard),
          });
          if (acquired > 0) {
            this.#need.want();
            this.#wake();
          }
        } while (this.#tickAgain && !this.#halted);
      } catch (err) {
        this.#warn('worker heartbeat failed', err);
      } finally {
        this.#tickRunning = undefined;
      }
    })();
    return this.#tickRunning;
  }

  async #loop(): Promise<void> {
    while (!this.#stopping) {
      try {
        const { free, routineRoom, worthClaiming } = claimRoom({
          concurrency: this.#o.concurrency,
          inFlight: this.#inFlight.size,
          routineInFlight: this.#inFlight.routineCount(),
          urgentWake: this.#urgentWake,
        });
        if (!worthClaiming) {
          await this.#sleep(this.#o.pollMs);
          continue;
        }
        if (this.#shards.claimable().length > 0) {
          const now = this.#o.clock.now();
          if (!this.#need.mayFind(now)) {
            await this.#sleep(this.#need.msUntilClaim(now));
            continue;
          }
          this.#urgentWake = false;
          const { claimed, routine } = await this.#shards.takeTurn(() => this.#claim(free, routineRoom));
          if (claimed === free) {
            this.#need.want();
            continue;
          }
          // Routine items may be left due for want of room: a completion or an urgent wake is the next reason to claim.
          if (routine === routineRoom && routineRoom < free) {
            this.#need.want();
            await this.#sleep(this.#o.pollMs);
            continue;
          }
          // The claim read when the next item falls due: no second query for how long to sleep.
          await this.#sleep(this.#delayUntil(this.#need.knownDueAt));
          continue;
        }
        await this.#sleep(await this.#idleDelay());
      } catch (err) {
        this.#warn('claiming work failed', err);
        this.#need.want();
        await this.#sleep(this.#o.pollMs);
      }
    }
  }

  async #claim(limit: number, routineLimit: number): Promise<{ claimed: number; routine: number }> {
    const shards = this.#shards.claimable();
    if (shards.length === 0) return { claimed: 0, routine: 0 };
    const filter = {
      claimant: this.id,
      now: this.#o.clock.now(),
      limit,
      routineLimit,
      shards,
      busyKeys: this.#inFlight.keys(),
      leaseHolder: this.id,
      // The worker's claim is a statement of its own on the database handle.
      relaxedCommit: true,
    };
    this.#need.claimStarted();
    const { items, nextDueAt } = await this.#preloads.claim((preload) =>
      claimDueItemsAndNext(this.#o.db, { ...filter, ...preload }),
    );
    if (nextDueAt) this.#need.noteDue(nextDueAt);
    for (const item of items) this.#launch(item, this.#shards.epochOf(item.shard));
    return { claimed: items.length, routine: items.filter((item) => !item.urgent).length };
  }

  async #idleDelay(): Promise<number> {
    const { db, pollMs, concurrency } = this.#o;
    if (this.#inFlight.size >= concurrency) return pollMs;
    return this.#delayUntil(await earliestDue(db, this.#shards.claimable(), this.#inFlight.keys()));
  }

  /** How long to sleep until `next` falls due: at most pollMs, at least MIN_SLEEP_MS. */
  #delayUntil(next: Date | number | undefined): number {
    const { clock, pollMs } = this.#o;
    if (next === undefined) return pollMs;
    const at = typeof next === 'number' ? next : next.getTime();
    return Math.min(pollMs, Math.max(MIN_SLEEP_MS, at - clock.now().getTime()));
  }

  #launch(item: ClaimedItem, epoch: number | undefined): void {
    // No epoch: the lease went between the claim and now; the new owner claims the item again.
    if (epoch === undefined) return;
    const { db, onItem } = this.#o;
    const lease = { workerId: this.id, shard: item.shard, epoch };
    const recordFinish = (claimed: ClaimedItem, finish: DoneOrRequeued, now: Date) =>
      finish.outcome === 'requeued'
        ? this.#completions.record(claimed, lease, addMs(now, finish.delayMs), finish.park)
        : this.#completions.record(claimed, lease);
    const done = processItem({
      ...this.#o,
      item,
      sql: new FencedExecutor(db, lease),
      lease,
      recordFinish,
      signal: this.#stopSignal.signal,
    })
      .then((report) => {
        this.#outcomes[report.outcome] += 1;
        if (report.requeueAt) this.#need.noteDue(report.requeueAt);
        if (report.outcome === 'fenced') {
          this.#o.log.warn('work item fenced: the shard has a new owner', { workerId: this.id, shard: item.shard });
        }
        try {
          onItem?.(report);
        } catch (err) {
          this.#warn('onItem threw', err);
        }
      })
      .catch((err) => {
        // The item is left claimed and due: claimed again at once.
        this.#need.want();
        this.#warn('recording a work result failed', err);
      })
      .finally(() => {
        // An urgent wake that came while the item ran found it busy and was spent on a claim that skipped it: its
        // claim now is urgent too, or the answer its workflow waits on would wait until half the slots are free.
        if (this.#inFlight.notifiedUrgently(item.key)) this.#urgentWake = true;
        if (this.#inFlight.remove(item.key)) this.#need.want();
        if (this.#shards.isLeaving(item.shard) && !this.#inFlight.isBusy(item.shard)) {
          void this.#tick();
        }
        this.#wake();
      });
    this.#inFlight.add(item, done);
  }

  #wake(): void {
    this.#signal.wake();
  }

  #sleep(ms: number): Promise<void> {
    return this.#stopping ? Promise.resolve() : this.#signal.sleep(ms);
  }
}

/**
 * Starts a worker: it registers in `workers`, heartbeats, holds leases on its share of the shards (live workers sorted
 * by id, shard `s` to worker `s mod n`), and runs the reconcilers of its shards' due items, at most `concurrency` at
 * once and never two with the same key. Several workers may run in one process (each with its own `db` handle or
 * sharing one) or in several. Resolves once the worker holds its first leases.
 *
 * @example
 * ```ts
 * const worker = await startWorker({
 *   db, clock: systemClock, shards: 64,
 *   reconcilers: new Map([['workflow', reconcileWorkflow]]),
 *   makeContext: (sql) => ({ ...baseContext, sql }),
 * });
 * process.on('SIGTERM', () => void worker.stop());
 * console.log(worker.stats().processed);
 * ```
 */
export async function startWorker(options: WorkerOptions): Promise<WorkerHandle> {
  const worker = new Worker(resolveWorkerOptions(options));
  await worker.start();
  return worker;
}
