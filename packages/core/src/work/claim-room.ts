/** How many items a worker may claim now, and whether a claim is worth a statement. */
export interface ClaimRoom {
  /** Slots free, urgent or routine. */
  free: number;
  /** Slots a routine (not urgent) item may take: the free ones outside the urgent reserve. */
  routineRoom: number;
  /** Whether to claim now rather than wait for more slots to free up or for an urgent wake. */
  worthClaiming: boolean;
}

/**
 * The slots of a worker kept for urgent items: a quarter of its concurrency, rounded down, so a burst of routine work
 * never makes a command's result wait for a free slot.
 *
 * @example
 * ```ts
 * urgentReserve(16); // 4
 * ```
 */
export function urgentReserve(concurrency: number): number {
  return Math.floor(concurrency / 4);
}

/**
 * Whether a worker claims now, and how many of each kind. It claims in batches: with items in flight it waits until
 * half the slots are free (a finished item wakes it), so a busy worker does not run one claim statement per item; but
 * an urgent wake is claimed as soon as a slot is free, and with no room for routine items only an urgent wake is worth
 * a claim.
 *
 * @example
 * ```ts
 * const room = claimRoom({ concurrency: 16, inFlight: 12, routineInFlight: 12, urgentWake: true });
 * // { free: 4, routineRoom: 0, worthClaiming: true }: the reserve is for the urgent item
 * ```
 */
export function claimRoom(state: {
  concurrency: number;
  inFlight: number;
  routineInFlight: number;
  urgentWake: boolean;
}): ClaimRoom {
  const { concurrency, inFlight, routineInFlight, urgentWake } = state;
  const free = Math.max(0, concurrency - inFlight);
  const routineRoom = Math.max(0, Math.min(free, concurrency - urgentReserve(concurrency) - routineInFlight));
  const batchReady = inFlight === 0 || (free >= Math.ceil(concurrency / 2) && routineRoom > 0);
  return { free, routineRoom, worthClaiming: free > 0 && (batchReady || urgentWake) };
}
