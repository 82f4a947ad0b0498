import { isComputeError } from '@better-compute/core';
import { sleep, type Wake } from './wake';

const FIRST_RETRY_MS = 250;
const LAST_RETRY_MS = 5_000;

/** What {@link untilAnswered} takes. */
export interface UntilAnsweredOptions<T> {
  /** Makes the call once; each attempt must be safe to repeat (a report names its command id). */
  send: () => Promise<T>;
  /** Whether to go on trying (the agent still runs, as the same identity, and what it calls for is still wanted). */
  keepTrying: () => boolean;
  wake: Wake;
  log: (message: string) => void;
  label: string;
}

/** What {@link deliverReport} takes. */
export interface DeliverReportOptions extends UntilAnsweredOptions<unknown> {
  /**
   * The command states that mean an earlier attempt landed (its answer was lost): a retried ack that finds the command
   * `acked` is delivered, not refused.
   */
  reached: readonly string[];
}

/**
 * Whether an agent API call is worth another attempt: no answer (a network error, the server restarting), an answer
 * the server could not give (5xx), or one that says the call may be retried.
 *
 * @example
 * ```ts
 * if (!isTransientAgentFailure(error)) throw error;
 * ```
 */
export function isTransientAgentFailure(error: unknown): boolean {
  if (!isComputeError(error)) return true;
  const details = error.details as { status?: unknown; retryable?: unknown };
  if (details.retryable === true) return true;
  return typeof details.status !== 'number' || details.status >= 500;
}

/**
 * Makes an agent API call until the control plane answers it, as a real agent does through a restart: a transient
 * failure ({@link isTransientAgentFailure}) is tried again after 250 ms, doubling to 5 s; a refusal, or
 * `keepTrying()` turning false, is thrown.
 *
 * @example
 * ```ts
 * const certificate = await untilAnswered({ send: () => client.join(token), keepTrying, wake, log, label: 'join' });
 * ```
 */
export async function untilAnswered<T>(options: UntilAnsweredOptions<T>): Promise<T> {
  let delay = 0;
  for (;;) {
    try {
      return await options.send();
    } catch (error) {
      if (!isTransientAgentFailure(error) || !options.keepTrying()) throw error;
      delay = Math.min(Math.max(delay * 2, FIRST_RETRY_MS), LAST_RETRY_MS);
      options.log(`${options.label} not delivered, again in ${delay} ms: ${(error as Error).message}`);
      await sleep(delay, options.wake);
      if (!options.keepTrying()) throw error;
    }
  }
}

/**
 * Sends an agent's report (ack, start, complete, fail, reject) until the control plane has it ({@link untilAnswered}):
 * a result lost with a restarting server would leave its workflow waiting until the command's deadline. A refusal that
 * says the command already reached the reported state counts as delivered; any other refusal is thrown.
 *
 * @example
 * ```ts
 * await deliverReport({ send: () => client.ack(id), reached: ['acked', 'running'], keepTrying, wake, log, label });
 * ```
 */
export async function deliverReport(options: DeliverReportOptions): Promise<void> {
  const { reached, send } = options;
  await untilAnswered({
    ...options,
    send: () =>
      send().catch((error: unknown) => {
        if (isComputeError(error) && error.code === 'INVALID_STATE') {
          const state = (error.details as { state?: unknown }).state;
          if (typeof state === 'string' && reached.includes(state)) return undefined;
        }
        throw error;
      }),
  });
}
