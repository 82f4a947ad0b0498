import { ComputeError, type Json } from '@better-compute/core';
import { connectedSiteAgents } from '@better-compute/core/kernel';
import {
  type AwaitCommandInput,
  type AwaitedCommand,
  awaitCommand,
  type StepContext,
  stepCommandKey,
  stepNotReady,
} from '@better-compute/provision';
import { type MachineBmc, type MetalMachine, sentCommand } from './machine-read';

export { type MachineBmc, type MachineSession, type MetalMachine, machineForStep, metalNode } from './machine-read';

/** How often a relaying step looks again for a site agent when none is connected (the pages' `commandStepPollMs`). */
export const RELAY_POLL_MS = 2_000;

/**
 * How often metal's relaying steps run again while their command is open (`awaitCommand`'s `pollMs`): only insurance.
 * A command's settle (result, rejection, expiry by a read or by the kernel's 30 s sweep) queues the workflow in the
 * settling statement, so the step runs again at once when its command ends; BMC calls take seconds, but a boot, an
 * image write, a wipe or a DCGM run take minutes to hours, and with thousands of machines in flight a look every few
 * seconds (or every 30 s, as before) was a pass of the database's per machine that found nothing new.
 *
 * @example
 * ```ts
 * await awaitCommand(ctx, { nodeId, kind: 'disk.wipe', payload, key: 'wipe', pollMs: RELAYED_COMMAND_POLL_MS });
 * ```
 */
export const RELAYED_COMMAND_POLL_MS = 300_000;

/**
 * The driver binding of a concern: the pinned profile's `drivers[concern]` when it binds one, else the machine's own
 * BMC driver (`{ name: bmc.driver }`), so a profile that binds nothing still drives the machine the way it was enrolled.
 *
 * @example
 * ```ts
 * driverBinding(machine, 'power'); // { name: 'redfish' }
 * ```
 */
export function driverBinding(machine: MetalMachine, concern: string): Json {
  return machine.drivers[concern] ?? { name: machine.bmc.driver };
}

/**
 * The `bmc` part of a `driver.invoke` payload (never the credential itself: its `SecretRef`).
 *
 * @example
 * ```ts
 * bmcPayloadOf(machine.bmc); // { address: '10.1.0.7', driver: 'ipmi', credentialRef: 'sec_…' }
 * ```
 */
export function bmcPayloadOf(bmc: MachineBmc): Json {
  return {
    address: bmc.address,
    driver: bmc.driver,
    ...(bmc.credentialRef ? { credentialRef: bmc.credentialRef } : {}),
  };
}

/**
 * The site agent a relaying step sends to. Once the step sent its first command (`firstKey`, this attempt), every
 * later command of the step goes to the same agent, even if the boot lease moved meanwhile, so a re-run never sends a
 * destructive command twice to two agents; before that, a connected site agent of the machine's site (the boot-lease
 * holder first, as `siteAgentFor`). With no agent connected the step waits (`stepNotReady`), and fails NO_SITE_AGENT
 * when its deadline is closer than one poll, as an agent site step does. A machine read with `firstKey` among its
 * `keys` already holds that first command, or the agent it would go to: nothing more is read for it.
 *
 * @example
 * ```ts
 * const agentId = await siteRelayAgent(ctx, machine, 'power');
 * ```
 */
export async function siteRelayAgent(ctx: StepContext, machine: MetalMachine, firstKey: string): Promise<string> {
  const key = stepCommandKey(ctx, firstKey);
  let agentNodeId: string | undefined;
  if (machine.sent?.keys.has(firstKey)) {
    agentNodeId = machine.sent.commands.find((c) => c.key === key)?.nodeId ?? machine.sent.connectedAgentId;
  } else {
    const { rows } = await ctx.sql.query<{ node_id: string }>(
      `SELECT c.node_id FROM commands c
       WHERE c.key = $2 AND c.node_id IN (SELECT n.id FROM nodes n WHERE n.site_id = $1 AND n.kind = 'site-agent')
       ORDER BY c.created_at LIMIT 1`,
      [machine.siteId, key],
    );
    const [agent] = rows[0] ? [] : await connectedSiteAgents(ctx.sql, machine.siteId, { now: ctx.clock.now() });
    agentNodeId = rows[0]?.node_id ?? agent?.nodeId;
  }
  if (agentNodeId) return agentNodeId;
  if (ctx.deadline.getTime() - ctx.clock.now().getTime() <= RELAY_POLL_MS) {
    throw new ComputeError('NO_SITE_AGENT', `no connected site agent served site ${machine.siteId}`, {
      details: { siteId: machine.siteId },
    });
  }
  throw stepNotReady(RELAY_POLL_MS);
}

/** One `driver.invoke` call of a relaying step: the operation, its input, the step-level key, and where it goes. */
export interface DriverCall {
  operation: string;
  input: Json;
  key: string;
  agentNodeId?: string;
  timeoutMs?: number;
  /** Which ends run the step again at once (see `awaitCommand`'s `wakeOn`). */
  wakeOn?: 'settle' | 'failure';
}

/**
 * The `awaitCommand` input of one `driver.invoke` for `operation` (`<concern>.<operation>`) to `agentNodeId`:
 * `{ operation, driver, input, bmc }` with `targetNodeId` the machine, under the step's key, with what the machine's
 * read found under that key. For a step that sends several as a sequence (`awaitCommands`).
 *
 * @example
 * ```ts
 * await awaitCommands(ctx, [driverCommand(ctx, machine, agentId, call), driverCommand(ctx, machine, agentId, next)]);
 * ```
 */
export function driverCommand(
  ctx: StepContext,
  machine: MetalMachine,
  agentNodeId: string,
  call: DriverCall,
): AwaitCommandInput {
  const concern = call.operation.slice(0, call.operation.indexOf('.'));
  const found = sentCommand(ctx, machine, agentNodeId, call.key);
  return {
    nodeId: agentNodeId,
    kind: 'driver.invoke',
    key: call.key,
    ...(found === undefined ? {} : { found }),
    targetNodeId: machine.nodeId,
    pollMs: RELAYED_COMMAND_POLL_MS,
    payload: {
      operation: call.operation,
      driver: driverBinding(machine, concern),
      input: call.input,
      bmc: bmcPayloadOf(machine.bmc),
    },
    ...(call.timeoutMs ? { timeoutMs: call.timeoutMs } : {}),
    ...(call.wakeOn ? { wakeOn: call.wakeOn } : {}),
  };
}

/**
 * Sends one `driver.invoke` for `operation` (`<concern>.<operation>`) to the machine's site agent and waits for it:
 * `{ operation, driver, input, bmc }` with `targetNodeId` the machine, under the step's key `wf:<id>:<step>#<n>:<key>`.
 * A machine read with `key` among its `keys` already holds the command: `awaitCommand` takes it from there.
 *
 * @example
 * ```ts
 * await invokeDriver(ctx, machine, { operation: 'power.setPower', input: { action: 'cycle' }, key: 'power' });
 * ```
 */
export async function invokeDriver(ctx: StepContext, machine: MetalMachine, call: DriverCall): Promise<AwaitedCommand> {
  const agentNodeId = call.agentNodeId ?? (await siteRelayAgent(ctx, machine, call.key));
  return awaitCommand(ctx, driverCommand(ctx, machine, agentNodeId, call));
}

/**
 * An agent's result bytes as JSON: `null` for none, DRIVER_ERROR (`reason: 'result-malformed'`) for bytes that are
 * not UTF-8 JSON, since a relaying step decides on what it reads.
 *
 * @example
 * ```ts
 * const report = resultJson(await awaitCommand(ctx, input), 'inspect.collect');
 * ```
 */
export function resultJson(command: Pick<AwaitedCommand, 'result' | 'commandId'>, stepId: string): Json {
  const bytes = command.result;
  if (!bytes || bytes.length === 0) return null;
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)) as Json;
  } catch {
    throw new ComputeError('DRIVER_ERROR', `${stepId}: the agent's result is not JSON`, {
      details: { commandId: command.commandId, reason: 'result-malformed' },
    });
  }
}

/**
 * What a step sends back from a relayed command: the command id and the agent's JSON result (small results only;
 * an agent's result is bounded by the command queue).
 *
 * @example
 * ```ts
 * return relayed(await invokeDriver(ctx, machine, call), 'power.getPower'); // { commandId, result }
 * ```
 */
export function relayed(command: AwaitedCommand, stepId: string): { commandId: string; result: Json } {
  return { commandId: command.commandId, result: resultJson(command, stepId) };
}
