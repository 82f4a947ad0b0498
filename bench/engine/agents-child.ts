// The in-process agents of bench/engine, run in a process of their own (BENCH_AGENTS=process): a compute with only the
// bench's command kind on its own pool, answering commands until the parent says stop, then reporting what it did.
import { betterCompute } from '@better-compute/core';
import { createPostgresDatabase } from '@better-compute/core/postgres';
import { benchModule } from './bench-module';
import { BulkAgents } from './bulk-agents';

const [url, kind, concurrency, thinkMs] = process.argv.slice(2);
if (!url || !kind || !process.send) throw new Error('agents-child: run by AgentsProcess, with a url and a kind');
const send = (message: unknown) => process.send?.(message);

const database = createPostgresDatabase({ url, max: Number(concurrency) + 2 });
const compute = await betterCompute({ database, modules: [benchModule] });
const agents = new BulkAgents(database, compute, kind, Number(concurrency), Number(thinkMs ?? 0));
process.on('message', (message) => {
  if (message !== 'stop') return;
  void (async () => {
    await agents.stop();
    send({
      completed: [...agents.completed.entries()],
      errors: agents.errors,
      lastError: agents.lastError === undefined ? undefined : String(agents.lastError),
    });
    await compute.close();
    await database.close();
    process.exit(0);
  })();
});
agents.start();
send('ready');
