import { Writable } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../src/logger';
import { installShutdown } from '../src/shutdown';

// The signal handling's decisions, driven through `trigger` with a recorded exit (the process-level SIGTERM → exit 0 is
// in server.test.ts and postgres.test.ts).

const quiet = () =>
  createLogger(
    'silent',
    new Writable({
      write: (_chunk, _encoding, done) => done(),
    }),
  );

afterEach(() => {
  process.removeAllListeners('SIGTERM');
  process.removeAllListeners('SIGINT');
  vi.useRealTimers();
});

describe('installShutdown', () => {
  it('exits 0 once the graceful stop resolves', async () => {
    const exit = vi.fn();
    const { trigger } = installShutdown({ log: quiet(), timeoutMs: 1_000, stop: async () => undefined, exit });
    trigger('SIGTERM');
    await vi.waitFor(() => expect(exit).toHaveBeenCalledWith(0));
  });

  it('exits 1 at once on a second signal while the stop runs', () => {
    const exit = vi.fn();
    const { trigger } = installShutdown({
      log: quiet(),
      timeoutMs: 60_000,
      stop: () => new Promise(() => undefined),
      exit,
    });
    trigger('SIGTERM');
    expect(exit).not.toHaveBeenCalled();
    trigger('SIGTERM');
    expect(exit).toHaveBeenCalledWith(1);
  });

  it('exits 1 when the deadline passes first, and 1 when the stop throws', async () => {
    vi.useFakeTimers();
    const exit = vi.fn();
    installShutdown({ log: quiet(), timeoutMs: 5_000, stop: () => new Promise(() => undefined), exit }).trigger(
      'SIGTERM',
    );
    vi.advanceTimersByTime(4_999);
    expect(exit).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(exit).toHaveBeenCalledWith(1);
    vi.useRealTimers();

    const failing = vi.fn();
    installShutdown({
      log: quiet(),
      timeoutMs: 5_000,
      stop: async () => {
        throw new Error('close failed');
      },
      exit: failing,
    }).trigger('SIGTERM');
    await vi.waitFor(() => expect(failing).toHaveBeenCalledWith(1));
  });
});
