import { credentialsApi } from '../api/credentials-api';
import { doctorApi } from '../api/doctor-api';
import { eventsApi } from '../api/events-api';
import { expireDueCommands } from '../commands';
import type { ComputeModule } from './module';

const SWEEP_EVERY_MS = 30_000;

/**
 * The core module's API groups: `credentials`, `events` and `doctor` (whose findings run over `modules()`, every
 * registered module).
 */
export function coreApi(modules: () => readonly ComputeModule[]) {
  return { credentials: credentialsApi(), events: eventsApi(), doctor: doctorApi(modules) };
}

/**
 * The kernel's own module: it owns the kernel migrations (applied first), the command-expiry sweep, which marks open
 * commands past their `notAfter` as `expired` (and wakes their waiters) even when nobody reads them, and the API groups
 * every compute has: `credentials`, `events` and `doctor`. `modules()` answers every registered module, for the doctor.
 */
export function createCoreModule(modules: () => readonly ComputeModule[]): ComputeModule {
  return Object.freeze<ComputeModule>({
    id: 'core',
    reconcilers: {
      'core.expireCommands': async (_key, ctx) => {
        await ctx.sql.transaction((tx) => expireDueCommands(tx, ctx.clock.now(), ctx.work));
        return { requeueAfterMs: SWEEP_EVERY_MS };
      },
    },
    api: coreApi(modules),
    init: async (ctx) => {
      await ctx.sql.transaction((tx) => ctx.work.enqueue(tx, { kind: 'core.expireCommands', key: 'sweep' }));
    },
  });
}
