import type { ServerLogger } from './logger';

/** Options of {@link installShutdown}. */
export interface ShutdownOptions {
  log: ServerLogger;
  /** After this long the process exits with 1 whatever is still running. */
  timeoutMs: number;
  /** The graceful stop: stop accepting and claiming, finish what is in flight, release leases, close. */
  stop: () => Promise<void>;
  exit?: (code: number) => void;
}

/**
 * SIGTERM and SIGINT: the first runs `stop` and exits 0 when it resolves (1 when it throws); a second signal, or
 * `timeoutMs` passing first, exits 1 at once.
 *
 * @example
 * ```ts
 * installShutdown({ log, timeoutMs: 30_000, stop: async () => { await server.close(); await compute.close(); } });
 * ```
 */
export function installShutdown(options: ShutdownOptions): { trigger(signal: string): void } {
  const exit = options.exit ?? ((code: number) => process.exit(code));
  let stopping = false;
  const trigger = (signal: string) => {
    if (stopping) {
      options.log.warn({ signal }, 'second signal: exiting now');
      exit(1);
      return;
    }
    stopping = true;
    options.log.info({ signal, timeoutMs: options.timeoutMs }, 'shutting down');
    const deadline = setTimeout(() => {
      options.log.error({ timeoutMs: options.timeoutMs }, 'shutdown deadline passed: exiting now');
      exit(1);
    }, options.timeoutMs);
    options
      .stop()
      .then(
        () => {
          options.log.info('stopped');
          return 0;
        },
        (error: unknown) => {
          options.log.error({ err: error instanceof Error ? error.message : String(error) }, 'shutdown failed');
          return 1;
        },
      )
      .then((code) => {
        clearTimeout(deadline);
        exit(code);
      });
  };
  process.on('SIGTERM', () => trigger('SIGTERM'));
  process.on('SIGINT', () => trigger('SIGINT'));
  return { trigger };
}
