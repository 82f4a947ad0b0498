import { randomUUID } from 'node:crypto';
import type { Command } from '@better-compute/core';
import type { AgentRole, AgentSession } from '@better-compute/core/kernel';
import type { AgentCommand } from '@better-compute/pki/agent-api';
import { createHttpAgent, type HttpAgent, type HttpAgentCertificate } from '../http-agent';
import type { SimAgent, SimCommandRecord, SimOutcome } from '../metal-sim/sim-agent';
import { deliverReport, untilAnswered } from './report';
import { createWake, sleep } from './wake';

/** What {@link createHttpSimAgent} takes. */
export interface HttpSimAgentOptions {
  /** The agent API's origin (`https://host:port`). */
  agentUrl: string;
  /** The PEM the agent API's TLS certificate chains to. */
  ca: string;
  /** Runs one acked command and says how it ended. */
  handle: (command: Command, agent: HttpSimAgent) => Promise<SimOutcome>;
  record: (entry: SimCommandRecord) => void;
  isDestructive: (kind: string) => boolean;
  log: (message: string) => void;
  /** How long one long poll is held when there is nothing to do (default 20 s). */
  pollWaitMs?: number;
  /**
   * Commands of one poll run concurrently, one at a time per key (a site agent: per machine). Without it the agent
   * runs its commands one after another, as a machine's own agent does.
   */
  laneOf?: (command: Command) => string;
}

/** A {@link SimAgent} over the agent API: it joins with a token, then long-polls in a loop of its own. */
export interface HttpSimAgent extends SimAgent {
  /** The HTTP client of its current identity (after a join). */
  readonly http: HttpAgent | undefined;
  /** Joins with a token: a fresh key and certificate (its previous client closed); `undefined` when refused. */
  join(token: string, claims?: Record<string, string>): Promise<HttpAgentCertificate | undefined>;
  /** A secret the live command `commandId` of this agent carries (fetched with the command's id when given). */
  fetchSecret(ref: string, commandId?: string): Promise<string>;
  /** Starts its poll loop (idle until it holds a session). */
  start(): void;
  /** Stops the loop, closes its session and its connections. */
  close(): Promise<void>;
}

const MIN_BACKOFF_MS = 250;
const MAX_BACKOFF_MS = 5_000;

function toCommand(command: AgentCommand, certificate: HttpAgentCertificate | undefined): Command {
  const now = new Date();
  return {
    id: command.id,
    tenantId: certificate?.tenantId ?? 'root',
    nodeId: certificate?.nodeId ?? '',
    kind: command.kind,
    payload: command.payload as Command['payload'],
    key: command.key,
    state: 'dispatched',
    notAfter: new Date(command.notAfter),
    ...(command.targetNodeId ? { targetNodeId: command.targetNodeId } : {}),
    ...(command.batchId ? { batchId: command.batchId } : {}),
    ...(command.workflowId ? { workflowId: command.workflowId } : {}),
    ...(command.stepId ? { stepId: command.stepId } : {}),
    createdAt: now,
    updatedAt: now,
  };
}

/**
 * Makes a simulated agent that speaks the agent API over HTTPS with mutual TLS (the testkit's `createHttpAgent`):
 * `join` gets it a certificate, `connect(role)` opens a session, and its loop long-polls, acks, starts and settles
 * each command with the handler's outcome (signed with its own key when the outcome asks), at most once per command
 * id. A report that gets no answer (the server restarting, a 5xx) is sent again with the same command id until the
 * server has it. After a poll error it backs off (250 ms doubling to 5 s) and polls again; `close()` ends the loop.
 *
 * @example
 * ```ts
 * const agent = createHttpSimAgent({ agentUrl, ca, handle, record, isDestructive, log });
 * await agent.join(token);
 * await agent.connect('site');
 * agent.start();
 * ```
 */
export function createHttpSimAgent(options: HttpSimAgentOptions): HttpSimAgent {
  const waitMs = options.pollWaitMs ?? 20_000;
  let http: HttpAgent | undefined;
  let session: AgentSession | undefined;
  let stopped = false;
  let online = true;
  let loop: Promise<void> | undefined;
  const wake = createWake();
  const handled = new Set<string>();
  const lanes = new Map<string, Promise<void>>();

  async function run(command: Command, role: AgentRole, client: HttpAgent): Promise<void> {
    // Every report goes again (same command id) until the server has it, while this identity still runs the command.
    const keepTrying = () => !stopped && http === client && Date.now() < command.notAfter.getTime();
    const deliver = (label: string, send: () => Promise<unknown>, reached: readonly string[]) =>
      deliverReport({
        send,
        reached,
        keepTrying,
        wake,
        log: options.log,
        label: `${command.kind} ${command.id} ${label}`,
      });
    await deliver('ack', () => client.ack(command.id), ['acked', 'running']);
    const outcome = await options.handle(command, agent);
    const payload = command.payload as { operation?: unknown } | null;
    options.record({
      commandId: command.id,
      agentNodeId: client.nodeId ?? '',
      role,
      kind: command.kind,
      key: command.key,
      ...(command.targetNodeId ? { targetNodeId: command.targetNodeId } : {}),
      ...(command.kind === 'driver.invoke' && typeof payload?.operation === 'string'
        ? { operation: payload.operation }
        : {}),
      payload: command.payload,
      outcome: outcome.outcome,
      ...('reason' in outcome ? { reason: outcome.reason } : {}),
      destructive: options.isDestructive(command.kind),
    });
    if (outcome.outcome === 'reject') {
      return deliver('reject', () => client.reject(command.id, outcome.reason), ['rejected']);
    }
    await deliver('start', () => client.start(command.id), ['running']);
    if (outcome.outcome === 'hang') return;
    if (outcome.outcome === 'fail') return deliver('fail', () => client.fail(command.id, outcome.reason), ['failed']);
    const completion = {
      ...(outcome.result === undefined ? {} : { result: outcome.result }),
      sign: outcome.sign === true || outcome.attested !== undefined,
    };
    await deliver('complete', () => client.complete(command.id, completion), ['succeeded']);
    await outcome.after?.();
  }

  function runLogged(command: Command, role: AgentRole, client: HttpAgent): Promise<void> {
    return run(command, role, client).catch((error: unknown) => {
      if (!stopped) options.log(`${command.kind} ${command.id}: ${(error as Error).message}`);
    });
  }

  /** One poll; returns how many new commands it ran (or started, on lanes). */
  async function pollOnce(wait: number): Promise<number> {
    const current = session;
    const client = http;
    if (!current || !client || !agent.online) return 0;
    const polled = await client.poll({ waitMs: wait });
    let count = 0;
    for (const raw of polled) {
      if (handled.has(raw.id)) continue;
      // A command polled by a boot that has since ended is left for the next boot's poll.
      if (session !== current || http !== client) break;
      handled.add(raw.id);
      const command = toCommand(raw, client.certificate);
      count += 1;
      if (!options.laneOf) {
        await runLogged(command, current.role, client);
        continue;
      }
      const lane = options.laneOf(command);
      const next = (lanes.get(lane) ?? Promise.resolve()).then(() => runLogged(command, current.role, client));
      lanes.set(lane, next);
      void next.then(() => {
        if (lanes.get(lane) === next) lanes.delete(lane);
      });
    }
    return count;
  }

  async function runLoop(): Promise<void> {
    let backoff = 0;
    while (!stopped) {
      if (!session || !http || !agent.online) {
        await wake.wait();
        continue;
      }
      const client = http;
      try {
        const ran = await pollOnce(waitMs);
        backoff = 0;
        // Only commands already running came back (a lane has not acked them yet): give it a moment.
        if (ran === 0 && lanes.size > 0) await sleep(50);
      } catch (error) {
        if (stopped) break;
        // The client was replaced under the poll (a reboot, a new join): not an error of the network.
        if (http !== client) continue;
        backoff = Math.min(Math.max(backoff * 2, MIN_BACKOFF_MS), MAX_BACKOFF_MS);
        options.log(`poll failed, again in ${backoff} ms: ${(error as Error).message}`);
        await sleep(backoff, wake);
      }
    }
  }

  const agent: HttpSimAgent = {
    get nodeId() {
      return http?.nodeId ?? '';
    },
    get online() {
      return online;
    },
    set online(value) {
      online = value;
      wake.notify();
    },
    get role() {
      return session?.role;
    },
    get bootId() {
      return session?.bootId;
    },
    get session() {
      return session ? { ...session } : undefined;
    },
    get http() {
      return http;
    },
    async join(token, claims) {
      const previous = http;
      session = undefined;
      http = undefined;
      await previous?.close().catch(() => undefined);
      const client = createHttpAgent({ baseUrl: options.agentUrl, ca: options.ca });
      try {
        // A ramdisk or bcd keeps trying while the control plane does not answer (a restart); a refusal is final.
        const certificate = await untilAnswered({
          send: () => client.join(token, claims),
          keepTrying: () => !stopped,
          wake,
          log: options.log,
          label: 'join',
        });
        http = client;
        return certificate;
      } catch (error) {
        await client.close().catch(() => undefined);
        options.log(`join refused (${(error as Error).message})`);
        return undefined;
      }
    },
    async connect(role, bootId = randomUUID()) {
      const client = http;
      if (!client) throw new Error('http sim agent: join before connecting');
      const opened = await untilAnswered({
        send: () => client.openSession(role, bootId),
        keepTrying: () => !stopped && http === client,
        wake,
        log: options.log,
        label: `open ${role} session`,
      });
      session = {
        id: opened.sessionId,
        nodeId: opened.nodeId,
        role: opened.role as AgentRole,
        bootId: opened.bootId,
        connectedAt: new Date(opened.connectedAt),
        lastSeenAt: new Date(opened.connectedAt),
      };
      wake.notify();
      return { ...session };
    },
    async disconnect() {
      const current = session;
      session = undefined;
      if (current && http) await http.closeSession().catch(() => undefined);
    },
    poll: () => pollOnce(0),
    async fetchSecret(ref, commandId) {
      const client = http;
      if (!client) throw new Error('http sim agent: not joined');
      // A secret the command needs is fetched again while the control plane does not answer (a restart), as the
      // command's report would be: failing the command for it would fail a step that only had to wait.
      return untilAnswered({
        send: () => client.fetchSecret(ref, commandId),
        keepTrying: () => !stopped && http === client,
        wake,
        log: options.log,
        label: `secret ${ref}`,
      });
    },
    start() {
      loop ??= runLoop();
    },
    async close() {
      stopped = true;
      wake.notify();
      session = undefined;
      await http?.close().catch(() => undefined);
      await loop;
      await Promise.all([...lanes.values()]);
    },
  };
  return agent;
}
