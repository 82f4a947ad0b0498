import type { ApiClient } from './client';
import type { GlobalOptions } from './config';
import { createOutput, type Output } from './output';

/** What a command's handler gets: the global options, where to write, and a client made on first use. */
export interface Runtime {
  globals: GlobalOptions;
  out: Output;
  client(): Promise<ApiClient>;
}

/** A command handler: positional arguments, the command's own options; returns the exit code (0 when void). */
export type Handler = (rt: Runtime, args: unknown[], opts: Record<string, unknown>) => Promise<number | undefined>;

export function createRuntime(globals: GlobalOptions): Runtime {
  let client: Promise<ApiClient> | undefined;
  return {
    globals,
    out: createOutput(globals),
    client: () => {
      client ??= (async () => {
        const [{ resolveConnection }, { ApiClient }] = await Promise.all([import('./config'), import('./client')]);
        return new ApiClient(await resolveConnection(globals));
      })();
      return client;
    },
  };
}
