// The agents of bench/agent-api, in a process of their own: either `http` (each a testkit HTTP agent: joined with the
// discovery token, a session opened, then long-polling `commands.poll` over its own keep-alive TLS connection with its
// client certificate, and answering every command with ack, start and complete) or `inproc` (the same loop through
// the kernel's pollCommands / ackCommand / startCommand / completeCommand on one pool, each call its own transaction
// as the agent API's are, a held poll woken by LISTEN on the commands channel as the agent API's is).
// Protocol (IPC, see protocol.ts): argv[2] the config (JSON); → ready; ← count | report | stop.
import { betterCompute, type SqlDatabase } from '@better-compute/core';
import { COMMANDS_CHANNEL } from '@better-compute/core/kernel';
import { createPostgresDatabase } from '@better-compute/core/postgres';
import { createHttpAgent } from '@better-compute/testkit';
import { benchModule } from '../engine/bench-module';
import { type AgentsConfig, type ChildMessage, type ParentMessage, type Receipt, wallMs } from './protocol';

const config = JSON.parse(process.argv[2] ?? 'null') as AgentsConfig | null;
if (!config || !process.send) throw new Error('agent-api agents-child: run by bench/agent-api/run.ts');
const send = (message: ChildMessage) => process.send?.(message);

let receipts: Receipt[] = [];
let completed = 0;
let errors = 0;
let lastError: string | undefined;
/** Agents with a poll out (sent, not answered). */
let polling = 0;
let running = true;
/** Errors by call and message, with the seconds since start of the first: what went wrong, and when. */
const errorKinds = new Map<string, { count: number; firstAtS: number }>();
const fail = (error: unknown, what = 'call') => {
  errors += 1;
  const details = (error as { details?: unknown } | undefined)?.details;
  lastError = `${what}: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}${details ? ` ${JSON.stringify(details)}` : ''}`;
  const kind = errorKinds.get(lastError);
  if (kind) kind.count += 1;
  else errorKinds.set(lastError, { count: 1, firstAtS: Math.round(performance.now() / 1000) });
};
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One agent's loop: poll (held), then ack, start and complete each command, one call at a time. */
interface Calls {
  poll(): Promise<{ id: string }[]>;
  ack(id: string): Promise<unknown>;
  start(id: string): Promise<unknown>;
  complete(id: string): Promise<unknown>;
}

/** A call retried as an agent would (each failure counted), so one failed answer does not strand its command. */
async function retried(what: string, call: () => Promise<unknown>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await call();
      return;
    } catch (error) {
      if (attempt >= 5 || !running) throw error;
      fail(error, what);
      await pause(50 * attempt);
    }
  }
}

async function loop(calls: Calls): Promise<void> {
  while (running) {
    let what = 'poll';
    try {
      polling += 1;
      let commands: { id: string }[];
      try {
        commands = await calls.poll();
      } finally {
        polling -= 1;
      }
      const receivedAt = wallMs();
      what = 'answer';
      for (const command of commands) {
        await retried('ack', () => calls.ack(command.id));
        await retried('start', () => calls.start(command.id));
        await retried('complete', () => calls.complete(command.id));
        receipts.push([command.id, receivedAt, wallMs()]);
        completed += 1;
      }
    } catch (error) {
      if (!running) return;
      fail(error, what);
      await pause(100);
    }
  }
}

/** Runs `task` over `items` with at most `limit` at once. */
async function eachLimited<T>(items: readonly T[], limit: number, task: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const item = items[next++] as T;
        await task(item);
      }
    }),
  );
}

/** Runs `task` a uniformly random 0 to `spreadMs` ms from now (agents that did not all start at the same instant). */
async function later(spreadMs: number, task: () => Promise<void>): Promise<void> {
  await pause(Math.random() * spreadMs);
  for (;;) {
    try {
      return await task();
    } catch (error) {
      fail(error, 'start');
      await pause(200);
    }
  }
}

let database: SqlDatabase | undefined;
const started = performance.now();
let nodeIds: string[];

if (config.mode === 'http') {
  const agents = Array.from({ length: config.agents }, () =>
    createHttpAgent({ baseUrl: config.baseUrl, ca: config.ca, requestTimeoutMs: 60_000 }),
  );
  await eachLimited(agents, config.joinConcurrency, async (agent) => {
    await agent.join(config.token, { serial: `bench-${Math.random().toString(36).slice(2)}` });
  });
  nodeIds = agents.map((agent) => agent.nodeId as string);
  const { pollLimit, waitMs } = config;
  for (const agent of agents) {
    // The session is opened right before the first poll, on the connection the polls then keep alive.
    void later(config.startSpreadMs, async () => {
      await agent.openSession('node');
    }).then(() =>
      loop({
        poll: () => agent.poll({ waitMs, limit: pollLimit }),
        ack: (id) => agent.ack(id),
        start: (id) => agent.start(id),
        complete: (id) => agent.complete(id),
      }),
    );
  }
} else {
  const db = createPostgresDatabase({ url: config.url, max: config.poolMax });
  database = db;
  const compute = await betterCompute({ database: db, modules: [benchModule] });
  const { commands } = compute;
  nodeIds = config.nodeIds;
  // The agent API's waiters, reduced to what a held poll needs: the node's wake, set before the poll reads.
  const wakes = new Map<string, () => void>();
  await db.listen(COMMANDS_CHANNEL, (nodeId) => wakes.get(nodeId)?.());
  const RECHECK_MS = 5_000;
  const { pollLimit, waitMs } = config;
  for (const nodeId of nodeIds) {
    void later(config.startSpreadMs, async () => undefined).then(() =>
      loop({
        async poll() {
          const deadline = Date.now() + waitMs;
          for (;;) {
            let woken = false;
            let wake: (() => void) | undefined;
            const woke = new Promise<void>((resolve) => {
              wake = () => {
                woken = true;
                resolve();
              };
            });
            wakes.set(nodeId, () => wake?.());
            try {
              const polled = await db.transaction((tx) => commands.pollCommands(tx, { nodeId, limit: pollLimit }));
              const remaining = deadline - Date.now();
              if (polled.length > 0 || remaining <= 0 || !running) return polled;
              if (!woken) {
                let timer: NodeJS.Timeout | undefined;
                await Promise.race([
                  woke,
                  new Promise((resolve) => (timer = setTimeout(resolve, Math.min(remaining, RECHECK_MS)))),
                ]);
                clearTimeout(timer);
              }
            } finally {
              wakes.delete(nodeId);
            }
          }
        },
        ack: (commandId) => db.transaction((tx) => commands.ackCommand(tx, { nodeId, commandId })),
        start: (commandId) => db.transaction((tx) => commands.startCommand(tx, { nodeId, commandId })),
        complete: (commandId) => db.transaction((tx) => commands.completeCommand(tx, { nodeId, commandId })),
      }),
    );
  }
}

// Let every agent's first poll go out before saying ready.
while (polling < nodeIds.length && performance.now() - started < 600_000) await pause(20);
send({ type: 'ready', nodeIds, setupMs: performance.now() - started, polling });

process.on('message', (message: ParentMessage) => {
  if (message === 'count') send({ type: 'count', completed, polling });
  else if (message === 'report') {
    const out = receipts;
    receipts = [];
    send({
      type: 'report',
      receipts: out,
      errors,
      ...(errorKinds.size > 0
        ? {
            lastError: [...errorKinds]
              .slice(0, 5)
              .map(([text, { count, firstAtS }]) => `${count}× ${text} (first at ${firstAtS} s)`)
              .join('; '),
          }
        : {}),
      clockOffsetMs: Date.now() - wallMs(),
    });
  } else if (message === 'stop') {
    running = false;
    // Held polls are not waited for, sessions not closed: the connections close with the process, as agents that go
    // away would.
    void (database?.close() ?? Promise.resolve()).finally(() => process.exit(0));
    setTimeout(() => process.exit(0), 2_000).unref();
  }
});
