// The IPC between bench/agent-api/run.ts and its agents' process (agents-child.ts), for both kinds of agents.

/** The wall-clock time in ms, high resolution: the process's time origin (a wall-clock sample) plus the monotonic clock. */
export function wallMs(): number {
  return performance.timeOrigin + performance.now();
}

/** What the agents' process is started with (argv[2], JSON). */
export type AgentsConfig =
  | {
      /** Over HTTPS: each agent joins with the token and long-polls `commands.poll` with its own client certificate. */
      mode: 'http';
      agents: number;
      baseUrl: string;
      ca: string;
      /** A discovery join token good for `agents` joins. */
      token: string;
      pollLimit: number;
      waitMs: number;
      /** Joins carried at once. */
      joinConcurrency: number;
      /** Each agent opens its session and starts polling a uniformly random 0 to this many ms after the joins. */
      startSpreadMs: number;
    }
  | {
      /** In process: the kernel's pollCommands / ack / start / complete on a pool, woken by LISTEN as the agent API is. */
      mode: 'inproc';
      agents: number;
      url: string;
      pollLimit: number;
      waitMs: number;
      /** The pool's size (the server's default pool is 10). */
      poolMax: number;
      /** The nodes, created by run.ts. */
      nodeIds: string[];
      /** Each agent starts polling a uniformly random 0 to this many ms after the start. */
      startSpreadMs: number;
    };

/** One command as the agents saw it: received (the poll's answer parsed) and completed (complete's answer back). */
export type Receipt = [commandId: string, receivedAt: number, completedAt: number];

/** child → parent */
export type ChildMessage =
  | { type: 'ready'; nodeIds: string[]; setupMs: number; polling: number }
  | { type: 'count'; completed: number; polling: number }
  | {
      type: 'report';
      receipts: Receipt[];
      errors: number;
      lastError?: string;
      /** Date.now() − wallMs() in the child at the time of the report: compared with the parent's, the clocks' offset. */
      clockOffsetMs: number;
    };

/** parent → child: `count` (completions so far), `report` (receipts since the last report, then cleared), `stop`. */
export type ParentMessage = 'count' | 'report' | 'stop';
