// The simulated site agent and machines of bench/metal, in a process of their own with their own pool (as remote agents
// would be): the testkit's machine model (BMC, PXE boot entries, ramdisk joining with its boot entry's token,
// inventory, image written with cloud-init user data, kexec into an OS whose bcd joins with its token, signed wipes)
// behind a bulk poller, answering every command after its think time (think-times.ts), a machine's agent connecting
// a boot's time after the command that booted it.
// Protocol (IPC): argv url, key (hex), site join token, machines, think model (JSON), runners; → {type:'ready', machines};
// ← {type:'nodes', nodeIds}; → 'attached'; ← 'start'; ← 'stop'; → {type:'report', …}, then it exits.
import { randomUUID } from 'node:crypto';
import { betterCompute, type Command, type Json } from '@better-compute/core';
import {
  type AgentRole,
  type AgentSession,
  COMMANDS_CHANNEL,
  closeAgentSession,
  DISPATCHABLE_SQL,
  openAgentSession,
  systemClock,
  touchAgentSession,
} from '@better-compute/core/kernel';
import { createPostgresDatabase } from '@better-compute/core/postgres';
import { generateSigningKeyPair } from '@better-compute/pki';
import {
  type BootEntry,
  createMachine,
  encodeResult,
  type MachineInternals,
  type SimAgent,
  type SimOutcome,
} from '@better-compute/testkit';
import { type AgentsReport, metalLabCompute, type ReadyMessage } from './lab';
import { bootMs, type ThinkModel, thinkMs } from './think-times';

const [url, keyHex, siteJoinToken, machineCount, modelArg, runnersArg] = process.argv.slice(2);
if (!url || !keyHex || !siteJoinToken || !process.send) {
  throw new Error('metal agents-child: run by bench/metal/run.ts, with a url, a key and a site join token');
}
const send = (message: unknown) => process.send?.(message);
const model = JSON.parse(modelArg ?? '{"kind":"fixed","meanMs":0}') as ThinkModel;
const runners = Number(runnersArg ?? 32);

const database = createPostgresDatabase({ url, max: runners + 4 });
const lab = metalLabCompute(database, Buffer.from(keyHex, 'hex'));
const compute = await betterCompute(lab.options);
const { security } = lab;
const clock = systemClock;
const { commands } = compute;

let errors = 0;
let lastError: unknown;
const fail = (err: unknown) => {
  errors += 1;
  lastError = err;
};

// The machines' agents: a session per boot, opened and closed through the kernel's session functions as the agent API
// does. Polling is the bulk poller's (below), so poll() is never called.
const sessions = new Set<AgentSession>();
/** What kind of boot each machine is in (set by the command that booted it): how long until its agent connects. */
const booting = new Map<string, 'firmware' | 'kexec'>();
/** When each machine's agent connected after a boot, for the engine's latency from a join to its next command. */
const connected = new Map<string, number[]>();
function machineAgent(nodeId: string): SimAgent {
  let session: AgentSession | undefined;
  let coming: NodeJS.Timeout | undefined;
  const open = async (role: AgentRole, bootId: string) => {
    const opened = await database.transaction((tx) => openAgentSession(tx, { nodeId, role, bootId, clock }));
    if (session) sessions.delete(session);
    session = opened;
    sessions.add(opened);
    return { ...opened };
  };
  return {
    nodeId,
    online: true,
    get role() {
      return session?.role;
    },
    get bootId() {
      return session?.bootId;
    },
    get session() {
      return session ? { ...session } : undefined;
    },
    async connect(role: AgentRole, bootId = randomUUID()) {
      const delay = role === 'site' ? 0 : bootMs(model, booting.get(nodeId) ?? 'firmware');
      if (delay === 0) return open(role, bootId);
      // The machine is booting: its agent connects once the boot is through (unless it is powered off first).
      clearTimeout(coming);
      coming = setTimeout(() => {
        coming = undefined;
        open(role, bootId).then(() => {
          const at = performance.timeOrigin + performance.now();
          connected.set(nodeId, [...(connected.get(nodeId) ?? []), at]);
        }, fail);
      }, delay);
      return { nodeId, role, bootId } as unknown as AgentSession;
    },
    async disconnect() {
      clearTimeout(coming);
      coming = undefined;
      const current = session;
      session = undefined;
      if (!current) return;
      sessions.delete(current);
      await database.transaction((tx) => closeAgentSession(tx, { sessionId: current.id, clock }));
    },
    async poll() {
      return 0;
    },
  };
}

// The site agent joins with the site's join token, as `bcd site` would, and holds the PXE boot entries it is sent.
const siteKey = generateSigningKeyPair('ed25519');
const siteJoined = await database.transaction((tx) =>
  security.joinAgent(tx, { token: siteJoinToken, publicKey: siteKey.publicKeyPem }),
);
const siteAgent = machineAgent(siteJoined.nodeId);
await siteAgent.connect('site');
const entries = new Map<string, BootEntry>();

// With the command that carries the reference, as the agent API's `secrets.fetch` passes it (one command read by its
// key, not every open command of the agent: the site agent has one per machine in flight).
const fetchSecret = (agentNodeId: string, ref: string, commandId?: string) =>
  security.fetchSecretForAgent(database, { agentNodeId, ref, ...(commandId ? { commandId } : {}) });

const machines: MachineInternals[] = [];
for (let i = 1; i <= Number(machineCount); i += 1) {
  machines.push(
    createMachine(
      i,
      'bench-site',
      { bmcCredentials: { username: 'admin', password: `pw-bench-${i}` } },
      {
        security,
        sql: database,
        install: undefined,
        fetchSecret,
        takeBootEntry(macs) {
          for (const mac of macs) {
            const entry = entries.get(mac);
            if (entry) {
              entries.delete(mac);
              return entry;
            }
          }
          return undefined;
        },
        log: (message) => fail(new Error(message)),
        // The clock is the system's: a boot's time is in the think time.
        elapse: () => undefined,
      },
    ),
  );
}
const byAddress = new Map(machines.map((m) => [m.spec.bmcAddress, m]));
const byNode = new Map<string, MachineInternals>();

const ok = (result: Json): SimOutcome => ({ outcome: 'succeed', result });
const failed = (reason: string): SimOutcome => ({ outcome: 'fail', reason });

/** The site agent's side of a command: the BMC driver, or a PXE boot entry (what the testkit's site agent does). */
async function siteCommand(command: Command): Promise<SimOutcome> {
  const payload = (command.payload ?? {}) as Record<string, Json>;
  if (command.kind === 'driver.invoke') {
    const bmc = payload.bmc as { address?: string; credentialRef?: string } | undefined;
    const machine = bmc?.address ? byAddress.get(bmc.address) : byNode.get(command.targetNodeId ?? '');
    if (!machine) return failed(`no BMC answers at ${bmc?.address ?? 'an unknown address'}`);
    const wanted = machine.spec.bmcCredentials;
    if (wanted) {
      if (!bmc?.credentialRef) return failed(`BMC ${machine.bmc.address} refused: no credentials`);
      const given = JSON.parse(await fetchSecret(siteAgent.nodeId, bmc.credentialRef, command.id)) as Record<
        string,
        unknown
      >;
      if (given.username !== wanted.username || given.password !== wanted.password) {
        return failed(`BMC ${machine.bmc.address} refused the credentials`);
      }
    }
    return machine.driver(String(payload.operation), (payload.input ?? {}) as Record<string, Json>);
  }
  if (command.kind === 'site.bootEntry') {
    const mac = String(payload.mac);
    if (payload.mode !== 'ramdisk') {
      entries.delete(mac);
      return ok({ mac, mode: String(payload.mode) });
    }
    entries.set(mac, { mac, token: await fetchSecret(siteAgent.nodeId, String(payload.tokenRef), command.id) });
    return ok({ mac, mode: 'ramdisk' });
  }
  return { outcome: 'reject', reason: `the bench's site agent does not implement ${command.kind}` };
}

// The poller: what every agent's pollCommands does (pending → dispatched, a command of a sequence only once the one
// before it succeeded), for the nodes the commands channel named since the last poll (each agent's long poll is woken
// by its own node's notification), through the kernel's index on a node's commands by state; and, as every long poll
// re-checks, now and then for every node at once, through a partial index on pending commands the run adds to its
// scratch database.
const PICK_SQL = (which: string) => `
UPDATE commands c SET state = 'dispatched', dispatched_at = $1, updated_at = $1
FROM (
  SELECT id FROM commands c WHERE ${which} AND state = 'pending' AND not_after >= $1 AND ${DISPATCHABLE_SQL}
  ORDER BY created_at, id LIMIT $2 FOR UPDATE SKIP LOCKED
) p
WHERE c.id = p.id
RETURNING c.*`;
const POLL_NODES_SQL = PICK_SQL('c.node_id = ANY($3::text[])');
const POLL_ALL_SQL = PICK_SQL('TRUE');
const POLL_LIMIT = 200;
/**
 * How long the poller waits without a notification before it looks at every node anyway (the agent API's long poll
 * re-checks too, every 15 s by default). It polls the nodes named at once when a command is enqueued or becomes
 * dispatchable (the commands channel), as the agent API's long polls are woken, not every few milliseconds: the
 * agents' process shares the machine with the engine and the database, and a poll of its own every 5 ms was database
 * work no deployed agent does. (Until 2026-12-07 07:10 every notification polled every node at once: 36 ms of
 * database time a poll, a quarter of a core at this bench's rate, which no fleet of agents polling their own commands
 * costs.)
 */
const RECHECK_MS = 5_000;
/** Sessions are touched this often (they go stale after a minute without). */
const TOUCH_EVERY_MS = 20_000;

interface CommandRow {
  id: string;
  node_id: string;
  kind: string;
  key: string;
  payload: Json;
  target_node_id: string | null;
  workflow_id: string | null;
}

const completed = new Map<string, number>();
const completing = new Map<string, number>();
const byKind = new Map<string, number>();
const queue: CommandRow[] = [];
const waiters: ((row: CommandRow | undefined) => void)[] = [];
const thinking = new Set<NodeJS.Timeout>();
let stopped = false;

function put(row: CommandRow): void {
  const waiter = waiters.shift();
  if (waiter) waiter(row);
  else queue.push(row);
}

function take(): Promise<CommandRow | undefined> {
  const next = queue.shift();
  if (next || stopped) return Promise.resolve(next);
  return new Promise((resolve) => waiters.push(resolve));
}

// The nodes named on the commands channel since the last poll began (a command enqueued or released for them), the
// idle poller waiting for one, and whether the next poll looks at every node (at the start, and after RECHECK_MS).
const notifiedNodes = new Set<string>();
let pollAll = true;
let wakePoller: (() => void) | undefined;
await database.listen(COMMANDS_CHANNEL, (payload) => {
  notifiedNodes.add(payload);
  wakePoller?.();
});

/** Resolves at the next notification on the commands channel, or after RECHECK_MS (then every node is polled). */
function nextNotification(): Promise<void> {
  if (notifiedNodes.size > 0) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      pollAll = true;
      done();
    }, RECHECK_MS);
    function done() {
      clearTimeout(timer);
      wakePoller = undefined;
      resolve();
    }
    wakePoller = done;
  });
}

function pickPending(): Promise<{ rows: CommandRow[] }> {
  const now = new Date();
  if (pollAll) {
    pollAll = false;
    notifiedNodes.clear();
    return database.query<CommandRow>(POLL_ALL_SQL, [now, POLL_LIMIT]);
  }
  const nodes = [...notifiedNodes];
  notifiedNodes.clear();
  return database.query<CommandRow>(POLL_NODES_SQL, [now, POLL_LIMIT, nodes]);
}

async function poll(): Promise<void> {
  while (!stopped) {
    try {
      const { rows } = await pickPending();
      for (const row of rows) {
        // Acked at once, as an agent does when it takes a command; answered after its think time.
        commands.ackCommand(database, { nodeId: row.node_id, commandId: row.id }).then(() => {
          const timer = setTimeout(
            () => {
              thinking.delete(timer);
              put(row);
            },
            thinkMs(model, row.kind, row.payload),
          );
          thinking.add(timer);
        }, fail);
      }
      // A full page may have left more behind: poll every node again at once; otherwise wait to be told.
      if (rows.length >= POLL_LIMIT) pollAll = true;
      else await nextNotification();
    } catch (err) {
      if (stopped) return;
      fail(err);
      await sleep(10);
    }
  }
}

function toCommand(row: CommandRow): Command {
  return {
    id: row.id,
    nodeId: row.node_id,
    kind: row.kind,
    key: row.key,
    payload: row.payload,
    ...(row.target_node_id ? { targetNodeId: row.target_node_id } : {}),
  } as unknown as Command;
}

async function answer(row: CommandRow): Promise<void> {
  const command = toCommand(row);
  const ref = { nodeId: row.node_id, commandId: row.id };
  const machine = byNode.get(row.node_id);
  noteBoot(row);
  const outcome = row.node_id === siteAgent.nodeId ? await siteCommand(command) : await machine?.agentCommand(command);
  const payload = row.payload as { operation?: unknown } | null;
  const label = row.kind === 'driver.invoke' ? `driver.invoke ${String(payload?.operation)}` : row.kind;
  byKind.set(label, (byKind.get(label) ?? 0) + 1);
  if (!outcome || outcome.outcome === 'reject') {
    await commands.rejectCommand(database, { ...ref, reason: outcome?.reason ?? 'no agent for this node' });
    return;
  }
  await commands.startCommand(database, ref);
  if (outcome.outcome === 'hang') return;
  if (outcome.outcome === 'fail') {
    await commands.failCommand(database, { ...ref, reason: outcome.reason });
    return;
  }
  const settling = performance.timeOrigin + performance.now();
  await commands.completeCommand(database, {
    ...ref,
    ...(outcome.result === undefined ? {} : { result: encodeResult(outcome.result) }),
    ...(outcome.attested === undefined ? {} : { attested: outcome.attested }),
  });
  completed.set(row.id, performance.timeOrigin + performance.now());
  completing.set(row.id, settling);
  await outcome.after?.();
}

/** Which boot a command starts, if any: a power on, cycle or reset goes through the firmware; a kexec does not. */
function noteBoot(row: CommandRow): void {
  const payload = (row.payload ?? {}) as { operation?: unknown; input?: { action?: unknown } };
  if (row.kind === 'driver.invoke' && payload.operation === 'power.setPower' && row.target_node_id) {
    if (['on', 'cycle', 'reset'].includes(String(payload.input?.action))) booting.set(row.target_node_id, 'firmware');
  } else if (row.kind === 'boot.kexec') {
    booting.set(row.node_id, 'kexec');
  } else if (row.kind === 'node.reboot') {
    booting.set(row.node_id, 'firmware');
  }
}

async function run(): Promise<void> {
  for (let row = await take(); row; row = await take()) {
    try {
      await answer(row);
    } catch (err) {
      if (stopped) return;
      fail(err);
    }
  }
}

async function touch(): Promise<void> {
  while (!stopped) {
    await sleep(TOUCH_EVERY_MS);
    for (const session of [...sessions]) {
      if (stopped) return;
      await database
        .transaction((tx) => touchAgentSession(tx, { sessionId: session.id, clock }))
        .catch((err: unknown) => {
          if (sessions.has(session)) fail(err);
        });
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

let loops: Promise<void>[] = [];
process.on('message', (message: unknown) => {
  if (typeof message === 'object' && message !== null && (message as { type?: string }).type === 'nodes') {
    const nodeIds = (message as { nodeIds: string[] }).nodeIds;
    nodeIds.forEach((nodeId, i) => {
      const machine = machines[i];
      if (!machine) return;
      machine.nodeId = nodeId;
      machine.attachAgent(machineAgent(nodeId));
      byNode.set(nodeId, machine);
    });
    send('attached');
    return;
  }
  if (message === 'start') {
    loops = [poll(), touch(), ...Array.from({ length: runners }, () => run())];
    return;
  }
  if (message !== 'stop') return;
  void (async () => {
    stopped = true;
    for (const timer of thinking) clearTimeout(timer);
    for (const waiter of waiters.splice(0)) waiter(undefined);
    await Promise.race([Promise.all(loops), sleep(5_000)]);
    const report: AgentsReport = {
      type: 'report',
      completed: [...completed.entries()],
      completing: [...completing.entries()],
      connected: [...connected.entries()],
      byKind: [...byKind.entries()],
      errors,
      ...(lastError === undefined ? {} : { lastError: String((lastError as Error).stack ?? lastError) }),
    };
    await compute.close();
    await database.close();
    // Exit once the report is written to the channel (a large one would be cut off by an early exit).
    process.send?.(report, () => process.exit(0));
  })();
});

const ready: ReadyMessage = {
  type: 'ready',
  machines: machines.map((m) => ({
    bmcAddress: m.spec.bmcAddress,
    bmcDriver: m.spec.bmcDriver,
    username: m.spec.bmcCredentials?.username ?? '',
    password: m.spec.bmcCredentials?.password ?? '',
    mac: m.spec.macs[0] as string,
  })),
};
send(ready);
