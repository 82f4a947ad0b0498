import { ComputeError } from '../errors';

/**
 * The number of shards when none is configured.
 *
 * @example
 * ```ts
 * shardOf(nodeId, DEFAULT_SHARDS);
 * ```
 */
export const DEFAULT_SHARDS = 64;

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;
const encoder = new TextEncoder();

/**
 * The 32-bit FNV-1a hash of a string's UTF-8 bytes. Stable across processes, versions and platforms, which is all a
 * shard function needs; it is not a cryptographic hash.
 *
 * @example
 * ```ts
 * fnv1a32(''); // 0x811c9dc5
 * fnv1a32('a'); // 0xe40c292c
 * ```
 */
export function fnv1a32(text: string): number {
  let hash = FNV_OFFSET;
  for (const byte of encoder.encode(text)) {
    hash ^= byte;
    hash = Math.imul(hash, FNV_PRIME) >>> 0;
  }
  return hash >>> 0;
}

/**
 * Checks a shard count: an integer from 1 to 65,536. Every process of one deployment must use the same count, because
 * a work item stores the shard it was enqueued into.
 *
 * @example
 * ```ts
 * assertShardCount(64, ['shards']);
 * ```
 */
export function assertShardCount(shards: unknown, path: readonly (string | number)[] = ['shards']): number {
  if (typeof shards !== 'number' || !Number.isInteger(shards) || shards < 1 || shards > 65_536) {
    throw new ComputeError('INVALID_CONFIG', 'shards must be an integer from 1 to 65536', { details: { path } });
  }
  return shards;
}

/**
 * The shard of a work key: `fnv1a32(key) mod shards`. Only the key counts, not the kind, so every reconciler of one
 * node (`workflow`, `node.health`, …) lands on the same worker.
 *
 * @example
 * ```ts
 * shardOf('node_01k9z3…', 64); // 0..63
 * ```
 */
export function shardOf(key: string, shards: number): number {
  return fnv1a32(key) % shards;
}

/**
 * The deterministic balance: with live worker ids sorted, shard `s` goes to worker `s mod n`. Every worker computes
 * the same answer from the same set of live workers, so no coordinator is needed.
 *
 * @example
 * ```ts
 * assignedShards('w-b', ['w-a', 'w-b'], 4); // [1, 3]
 * ```
 */
export function assignedShards(workerId: string, liveWorkerIds: readonly string[], shards: number): number[] {
  const live = [...new Set([...liveWorkerIds, workerId])].sort();
  const position = live.indexOf(workerId);
  const mine: number[] = [];
  for (let shard = position; shard < shards; shard += live.length) mine.push(shard);
  return mine;
}
