import { expireDueCommands } from '../commands';
import type { ComputeModule } from './module';

const SWEEP_EVERY_MS = 30_000;

/**
 * The kernel's own module: it owns the kernel migrations (applied first) and the command-expiry sweep, which marks
 * open commands past their `notAfter` as `expired` (and wakes their waiters) even when nobody reads them.
 */
export const coreModule: ComputeModule = Object.freeze<ComputeModule>({
  id: 'core',
  reconcilers: {
    'core.expireCommands': async (_key, ctx) => {
      await ctx.sql.transaction((tx) => expireDueCommands(tx, ctx.clock.now(), ctx.work));
      return { requeueAfterMs: SWEEP_EVERY_MS };
    },
  },
  init: async (ctx) => {
    await ctx.sql.transaction((tx) => ctx.work.enqueue(tx, { kind: 'core.expireCommands', key: 'sweep' }));
  },
});
