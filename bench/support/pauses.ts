// What stalls the engine's process apart from the database: its event loop's delay and its garbage collections, each
// with when it happened (wall ms since the epoch), so that a slow result→next can be told apart from a paused process.

import { type IntervalHistogram, monitorEventLoopDelay, PerformanceObserver, performance } from 'node:perf_hooks';

/** One pause of the process: a garbage collection (the bench's forced ones among them), or the bench's own work. */
export interface Pause {
  /** Wall ms since the epoch. */
  at: number;
  ms: number;
  what: string;
}

/** What {@link watchPauses} gives back when stopped. */
export interface PauseReport {
  /** The event loop's delay in ms, sampled every 1 ms: p50, p99, max. */
  loopDelay: { p50: number; p99: number; max: number };
  /** Every garbage collection of at least 1 ms, and the bench's marked pauses. */
  pauses: Pause[];
}

const GC_KINDS: Record<number, string> = { 1: 'gc minor', 2: 'gc major', 4: 'gc incremental', 8: 'gc weak callbacks' };

/**
 * Watches this process's event loop delay and its garbage collections until `stop()`; `mark` records a pause the
 * bench causes itself (a forced GC for a memory sample), measured around the call.
 *
 * @example
 * ```ts
 * const watch = watchPauses();
 * watch.mark('forced gc', () => gc());
 * const { loopDelay, pauses } = watch.stop();
 * ```
 */
export function watchPauses(): { mark: (what: string, run: () => void) => void; stop: () => PauseReport } {
  const histogram: IntervalHistogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  const pauses: Pause[] = [];
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      if (entry.duration < 1) continue;
      const kind = (entry as { detail?: { kind?: number } }).detail?.kind ?? 0;
      pauses.push({
        at: performance.timeOrigin + entry.startTime,
        ms: entry.duration,
        what: GC_KINDS[kind] ?? 'gc',
      });
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  return {
    mark(what, run) {
      const at = performance.timeOrigin + performance.now();
      run();
      pauses.push({ at, ms: performance.timeOrigin + performance.now() - at, what });
    },
    stop() {
      histogram.disable();
      observer.disconnect();
      const ms = (ns: number) => ns / 1e6;
      return {
        loopDelay: { p50: ms(histogram.percentile(50)), p99: ms(histogram.percentile(99)), max: ms(histogram.max) },
        pauses: pauses.sort((a, b) => a.at - b.at),
      };
    },
  };
}

/**
 * The pauses that overlap `[from, from + ms]` (wall ms since the epoch).
 *
 * @example
 * ```ts
 * pausesDuring(report.pauses, sample.resultAt, sample.ms); // [{ at, ms: 31, what: 'forced gc' }]
 * ```
 */
export function pausesDuring(pauses: readonly Pause[], from: number, ms: number): Pause[] {
  return pauses.filter((p) => p.at < from + ms && p.at + p.ms > from);
}
