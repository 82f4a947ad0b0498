import { addMs, type Clock } from '../clock';
import type { Logger } from '../kernel/logger';
import type { SqlExecutor } from '../sql/executor';
import { Mutex } from '../sql/mutex';
import { acquireLeases, heartbeat, liveWorkerIds, releaseLeases, renewLeases } from './leases';
import { assignedShards } from './shard';

/** What a {@link ShardHolder} needs of its worker's options. */
export interface ShardHolderOptions {
  workerId: string;
  db: SqlExecutor;
  clock: Clock;
  leaseMs: number;
  /** How many shards the queue has. */
  shards: number;
  log: Logger;
}

/**
 * The shards one worker holds leases on, and the ones assigned to it: live workers sorted by id, shard `s` to worker
 * `s mod n`. A rebalance heartbeats, renews what it holds (noting any lease lost to another worker), gives up what is
 * no longer assigned once no item of it is in flight (announcing it, so the new owner takes it at once), and takes
 * what is assigned and free. A worker claims from the shards it both holds and is assigned.
 *
 * Claims and rebalances take turns ({@link ShardHolder.takeTurn}), so a shard is never released while a claim from it
 * is under way.
 *
 * @example
 * ```ts
 * const holder = new ShardHolder({ workerId, db, clock, leaseMs: 15_000, shards: 64, log });
 * await holder.rebalance({ isStopping: () => false, isBusy: () => false });
 * const items = await holder.takeTurn(() => claim(holder.claimable()));
 * ```
 */
export class ShardHolder {
  readonly #o: ShardHolderOptions;
  readonly #turns = new Mutex();
  readonly #held = new Map<number, number>(); // shard → epoch
  #assigned = new Set<number>();

  constructor(options: ShardHolderOptions) {
    this.#o = options;
  }

  /** Runs `fn` when no rebalance is under way, and holds rebalances off until it ends. */
  takeTurn<T>(fn: () => Promise<T>): Promise<T> {
    return this.#turns.run(fn);
  }

  /** The epoch of the lease held on `shard`, or undefined when it is not held. */
  epochOf(shard: number): number | undefined {
    return this.#held.get(shard);
  }

  /** Whether the worker claims from `shard`: held and assigned. */
  isClaimable(shard: number): boolean {
    return this.#held.has(shard) && this.#assigned.has(shard);
  }

  /** Whether `shard` is held but assigned to another worker now: to give up once it drains. */
  isLeaving(shard: number): boolean {
    return this.#held.has(shard) && !this.#assigned.has(shard);
  }

  /** The shards the worker claims from. */
  claimable(): number[] {
    return [...this.#held.keys()].filter((s) => this.#assigned.has(s));
  }

  /** The shards it holds leases on, ascending. */
  held(): number[] {
    return [...this.#held.keys()].sort((a, b) => a - b);
  }

  /**
   * One rebalance, in its turn. Once the worker is stopping (asked when the turn comes, so a rebalance queued before
   * the stop never heartbeats after it), it assigns itself nothing, so it only renews and gives up what drained.
   * Resolves to how many shards it took.
   */
  rebalance(worker: { isStopping: () => boolean; isBusy: (shard: number) => boolean }): Promise<number> {
    return this.#turns.run(() => this.#rebalance(worker.isStopping(), worker.isBusy));
  }

  /** Gives up every lease, in its turn (releaseLeases announces it). */
  releaseAll(): Promise<void> {
    const { db, workerId, clock } = this.#o;
    return this.#turns.run(async () => {
      await releaseLeases(db, workerId, clock.now());
      this.#held.clear();
    });
  }

  async #rebalance(stopping: boolean, isBusy: (shard: number) => boolean): Promise<number> {
    const { db, clock, leaseMs, shards, workerId } = this.#o;
    const now = clock.now();
    const expiresAt = addMs(now, leaseMs);
    if (!stopping) await heartbeat(db, workerId, now);
    const renewed = await renewLeases(db, workerId, [...this.#held.keys()], expiresAt);
    for (const [shard, epoch] of this.#held) {
      if (renewed.get(shard) === epoch) continue;
      this.#held.delete(shard);
      this.#o.log.warn('shard lease lost to another worker', { workerId, shard });
    }
    const live = stopping ? [] : await liveWorkerIds(db, addMs(now, -leaseMs));
    this.#assigned = new Set(stopping ? [] : assignedShards(workerId, live, shards));
    const drained = [...this.#held.keys()].filter((s) => !this.#assigned.has(s) && !isBusy(s));
    if (drained.length > 0) {
      await releaseLeases(db, workerId, now, drained);
      for (const shard of drained) this.#held.delete(shard);
    }
    if (stopping) return 0;
    const wanted = [...this.#assigned].filter((s) => !this.#held.has(s));
    const acquired = await acquireLeases(db, workerId, wanted, now, expiresAt);
    for (const [shard, epoch] of acquired) this.#held.set(shard, epoch);
    return acquired.size;
  }
}
