import type { Compute } from '@better-compute/core';
import type { FakeAgent } from './fake-agent';
import type { FakeClock } from './fake-clock';

/**
 * What {@link settle} takes.
 *
 * @example
 * ```ts
 * const options: SettleOptions = { clock, agents: [siteAgent, machine], horizonMs: 2 * 60 * 60 * 1000 };
 * ```
 */
export interface SettleOptions {
  /** The fake clock the compute was built with; settle moves it forward to the next due item. */
  clock: FakeClock;
  /** Agents polled after every pass of due work: FakeAgents, or anything with `poll()` (the metal simulator's). */
  agents?: readonly Pick<FakeAgent, 'poll'>[];
  /** The most passes before settle gives up (a reconciler that never stops asking). Default 10,000. */
  maxPasses?: number;
  /** How far past its start settle may move the clock before it gives up. Default 24 hours. */
  horizonMs?: number;
  /**
   * Work kinds that run when due but never keep settle going (periodic sweeps that requeue forever). Default
   * `['core.expireCommands']`.
   */
  idleKinds?: readonly string[];
}

/**
 * What {@link settle} did: how many passes it ran and how far it moved the clock.
 *
 * @example
 * ```ts
 * const report: SettleReport = await settle(compute, { clock });
 * expect(report.advancedMs).toBe(120_000);
 * ```
 */
export interface SettleReport {
  passes: number;
  advancedMs: number;
}

const DEFAULT_HORIZON_MS = 24 * 60 * 60 * 1000;

interface PendingRow {
  kind: string;
  key: string;
  not_before: Date;
  attempts: number;
  last_error: string | null;
}

function describe(rows: PendingRow[]): string {
  if (rows.length === 0) return '';
  const items = rows.map(
    (row) =>
      `${row.kind}/${row.key} due ${row.not_before.toISOString()}` +
      (row.attempts > 0 ? ` after ${row.attempts} failed attempts (${row.last_error ?? 'no error recorded'})` : ''),
  );
  return `; the next items: ${items.join(', ')}`;
}

/**
 * Drives a compute on a fake clock until nothing is left to do: runs the due work, polls the agents, and when neither
 * did anything moves the clock to the earliest `not_before` among the work items whose kind is not idle, then goes
 * on. It returns once only idle kinds (or nothing) remain queued. It throws an Error past `maxPasses` passes, or when
 * the next item lies past `horizonMs` after the clock's time at the start, naming the next items either way.
 *
 * Use it on a compute without running workers; `compute`'s clock must be `clock`. `compute` may be anything with
 * `runDueWork()` and the `database` it runs on (a worker in another process, driven on `clock`'s time).
 *
 * @example
 * ```ts
 * const clock = createFakeClock();
 * const compute = await betterCompute({ database, clock, modules });
 * const agent = createFakeAgent(compute, { nodeId, role: 'node' });
 * await agent.connect();
 * const { passes, advancedMs } = await settle(compute, { clock, agents: [agent] });
 * ```
 */
export async function settle(
  compute: Pick<Compute, 'runDueWork' | 'database'>,
  options: SettleOptions,
): Promise<SettleReport> {
  const { clock } = options;
  const agents = options.agents ?? [];
  const maxPasses = options.maxPasses ?? 10_000;
  const horizonMs = options.horizonMs ?? DEFAULT_HORIZON_MS;
  const idleKinds = [...(options.idleKinds ?? ['core.expireCommands'])];
  if (!Number.isInteger(maxPasses) || maxPasses < 1) throw new Error('settle: maxPasses must be a positive integer');
  if (!Number.isFinite(horizonMs) || horizonMs < 0) throw new Error('settle: horizonMs must be a finite number ≥ 0');
  const startMs = clock.now().getTime();
  const limitMs = startMs + horizonMs;

  const pending = async (limit: number) =>
    (
      await compute.database.query<PendingRow>(
        `SELECT kind, key, not_before, attempts, last_error FROM work_items WHERE NOT (kind = ANY($1::text[]))
         ORDER BY not_before, kind, key LIMIT $2`,
        [idleKinds, limit],
      )
    ).rows;

  let passes = 0;
  for (;;) {
    if (passes >= maxPasses) {
      throw new Error(`settle did not settle within ${maxPasses} passes${describe(await pending(5))}`);
    }
    passes += 1;
    let moved = await compute.runDueWork();
    for (const agent of agents) moved += await agent.poll();
    if (moved > 0) continue;
    const [next] = await pending(5);
    if (!next) return { passes, advancedMs: clock.now().getTime() - startMs };
    const dueMs = next.not_before.getTime();
    if (dueMs > limitMs) {
      throw new Error(
        `settle would move the clock past its horizon of ${horizonMs} ms (to ${next.not_before.toISOString()}, ` +
          `started at ${new Date(startMs).toISOString()})${describe(await pending(5))}`,
      );
    }
    if (dueMs > clock.now().getTime()) clock.set(next.not_before);
  }
}
