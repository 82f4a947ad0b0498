import type { Command } from '@better-compute/core';
import {
  BOOT_MS,
  type BootEntry,
  createMachine,
  type InstallHook,
  type MachineInternals,
  type SimMachine,
  type SimMachineSpec,
} from '../metal-sim/machine';
import type { SimCommandRecord, SimOutcome } from '../metal-sim/sim-agent';
import { siteCommand, takeBootEntry } from '../metal-sim/site-commands';
import { createHttpSimAgent, type HttpSimAgent } from './http-sim-agent';
import { sleep } from './wake';

/** What {@link createHttpSimSite} takes. */
export interface HttpSimSiteOptions {
  /** The agent API's origin, e.g. `https://localhost:8444`. */
  agentUrl: string;
  /** The PEM the agent API's TLS certificate chains to (the control plane's CA). */
  ca: string;
  /** A site join token (`sites.joinToken`): the site agent joins with it. */
  siteJoinToken: string;
  /** How many machines (default specs), or one spec per machine. */
  machines: number | readonly SimMachineSpec[];
  /** Where the agents say what went wrong (a refused join, a failed poll); default nowhere. */
  log?: (message: string) => void;
  /** What an image or an installer ISO boots (see `InstallHook`); default `defaultInstall`. */
  install?: InstallHook;
  /** How long a boot takes, in real time (default 1,000 ms). */
  bootMs?: number;
  /** How long each agent's long poll is held (default 20 s). */
  pollWaitMs?: number;
  /** The number of the first machine (default 1); MACs, BMC and IP addresses derive from it. */
  firstIndex?: number;
  /** Which command kinds are destructive, for `commands[].destructive` (default: none known). */
  isDestructive?: (kind: string) => boolean;
}

/** A `metal.enroll` body for one simulated machine. */
export interface HttpSimEnrollInput {
  tenantId: string;
  siteId: string;
  bmc: { address: string; driver: string; username?: string; password?: string };
  macs: string[];
}

/** A simulated site whose agents speak the agent API over HTTPS (see {@link createHttpSimSite}). */
export interface HttpSimSite {
  readonly siteId: string;
  readonly tenantId: string;
  readonly machines: readonly SimMachine[];
  readonly siteAgent: HttpSimAgent;
  /** Every command the site agent and the machines' agents ran, in order. */
  readonly commands: readonly SimCommandRecord[];
  /** The boot entries the site agent holds, by MAC. */
  readonly bootEntries: readonly string[];
  /** The `metal.enroll` bodies of the machines (BMC address, driver and credentials; the MAC that PXE boots). */
  enrollInputs(): HttpSimEnrollInput[];
  /** Stops every agent's loop and closes their sessions and connections. */
  close(): Promise<void>;
}

/**
 * A simulated site of bare-metal machines around a running agent API, over real HTTPS with mutual TLS: the site
 * agent joins with `siteJoinToken`, opens a `site` session and long-polls, answering `driver.invoke`,
 * `site.bootEntry` and `site.httpProxy` from the machines' BMCs (as `createMetalSim`'s site agent does, the same
 * code); each machine's ramdisk joins with its PXE boot entry's token and its installed OS with the token its user
 * data carries, each then long-polling its own commands. Boots take `bootMs` of real time. Enroll the machines with
 * `enrollInputs()` through `metal.enroll`; they go on to `available` as the control plane's workers run.
 *
 * @example
 * ```ts
 * const site = await createHttpSimSite({ agentUrl: 'https://localhost:8444', ca, siteJoinToken, machines: 8 });
 * for (const body of site.enrollInputs()) await api.metal.enroll(adminToken, body);
 * // … deploy, release …
 * await site.close();
 * ```
 */
export async function createHttpSimSite(options: HttpSimSiteOptions): Promise<HttpSimSite> {
  const log = options.log ?? (() => undefined);
  const isDestructive = options.isDestructive ?? (() => false);
  const bootMs = options.bootMs ?? BOOT_MS;
  const commands: SimCommandRecord[] = [];
  const record = (entry: SimCommandRecord) => commands.push(entry);
  const entries = new Map<string, BootEntry>();
  const machines: MachineInternals[] = [];
  const agents: HttpSimAgent[] = [];
  const common = {
    agentUrl: options.agentUrl,
    ca: options.ca,
    record,
    isDestructive,
    ...(options.pollWaitMs === undefined ? {} : { pollWaitMs: options.pollWaitMs }),
  };

  // The BMC of one machine answers one command at a time; different machines' commands run side by side.
  const laneOf = (command: Command) => {
    const payload = (command.payload ?? {}) as { bmc?: { address?: unknown }; mac?: unknown; url?: unknown };
    return String(payload.bmc?.address ?? payload.mac ?? command.targetNodeId ?? command.id);
  };
  const siteAgent = createHttpSimAgent({
    ...common,
    log: (message) => log(`site agent: ${message}`),
    laneOf,
    handle: (command, self) =>
      siteCommand(
        {
          siteId,
          machines: () => machines,
          entries,
          fetchSecret: (ref, commandId) => self.fetchSecret(ref, commandId),
        },
        command,
      ),
  });
  agents.push(siteAgent);
  const joined = await siteAgent.join(options.siteJoinToken);
  if (!joined?.siteId) {
    await siteAgent.close();
    throw new Error('http sim site: the site agent could not join with the site join token');
  }
  const siteId = joined.siteId;
  const tenantId = joined.tenantId;
  await siteAgent.connect('site');
  siteAgent.start();

  const specs =
    typeof options.machines === 'number' ? Array.from({ length: options.machines }, () => ({})) : options.machines;
  const firstIndex = options.firstIndex ?? 1;
  specs.forEach((spec, i) => {
    const agentLog = (message: string) => log(`machine ${firstIndex + i}: ${message}`);
    const agent = createHttpSimAgent({
      ...common,
      log: agentLog,
      async handle(command): Promise<SimOutcome> {
        const fault = machine.takeFault(command);
        if (fault)
          return fault.hang ? { outcome: 'hang' } : { outcome: 'fail', reason: fault.reason ?? 'simulated failure' };
        return machine.agentCommand(command);
      },
    });
    const machine: MachineInternals = createMachine(firstIndex + i, siteId, spec, {
      async join(token, claims) {
        const certificate = await agent.join(token, claims);
        if (!certificate) return undefined;
        machine.nodeId = certificate.nodeId;
        return { serial: certificate.serial, nodeId: certificate.nodeId };
      },
      install: options.install,
      fetchSecret: (_agentNodeId, ref, commandId) => agent.fetchSecret(ref, commandId),
      takeBootEntry: (macs) => takeBootEntry(entries, macs),
      log: agentLog,
      elapse: () => sleep(bootMs),
    });
    machine.attachAgent(agent);
    agent.start();
    agents.push(agent);
    machines.push(machine);
  });

  return {
    siteId,
    tenantId,
    machines,
    siteAgent,
    get commands() {
      return commands.map((c) => ({ ...c }));
    },
    get bootEntries() {
      return [...entries.keys()];
    },
    enrollInputs: () =>
      machines.map((machine) => {
        const { bmcAddress, bmcDriver, bmcCredentials, macs } = machine.spec;
        return {
          tenantId,
          siteId,
          bmc: { address: bmcAddress, driver: bmcDriver, ...(bmcCredentials ?? {}) },
          macs: [macs[0] as string],
        };
      }),
    async close() {
      await Promise.all(agents.map((agent) => agent.close()));
    },
  };
}
