import { ComputeError, type Json } from '@better-compute/core';
import {
  type AwaitedCommand,
  awaitCommand,
  type StepContext,
  siteAgentFor,
  stepNotReady,
} from '@better-compute/provision';

/** How often a relaying step looks again at its command or for a site agent (the pages' `commandStepPollMs`). */
export const RELAY_POLL_MS = 2_000;

/** A machine's BMC as a site agent needs it: the address, the driver name and the reference to its credential. */
export interface MachineBmc {
  address: string;
  driver: string;
  credentialRef?: string;
}

/** What the relaying steps read about the workflow's machine: one row of `metal_machines`, and the profile's drivers. */
export interface MetalMachine {
  nodeId: string;
  tenantId: string;
  siteId: string;
  bmc: MachineBmc;
  /** The addresses the control plane knows for the machine: the only ones `httpViaSite` may reach. */
  addresses: string[];
  /** The pinned profile's `drivers` (concern → binding), `{}` when it binds none. */
  drivers: Record<string, Json>;
}

interface MachineRow {
  tenant_id: string;
  site_id: string;
  bmc_address: string;
  bmc_driver: string;
  bmc_credential_ref: unknown;
  addresses: string[] | null;
  drivers: Record<string, Json> | null;
}

/**
 * The node of a node workflow, or INVALID_CONFIG naming the step that needs one.
 *
 * @example
 * ```ts
 * const node = metalNode(ctx, 'power.setPower');
 * ```
 */
export function metalNode(ctx: StepContext, stepId: string): NonNullable<StepContext['node']> {
  if (!ctx.node) {
    throw new ComputeError('INVALID_CONFIG', `${stepId} acts on a machine; this workflow has no node`, {
      details: { path: ['nodeId'] },
    });
  }
  return ctx.node;
}

/**
 * Reads the workflow's machine from `metal_machines` (its BMC, site, owner and known addresses) with the pinned
 * profile's `drivers`, in one statement. A node metal does not know is INVALID_STATE (`reason: 'not-enrolled'`): only
 * an enrolled or adopted machine has a BMC to drive.
 *
 * @example
 * ```ts
 * const machine = await machineForStep(ctx, 'power.setPower');
 * machine.bmc; // { address: '10.1.0.7', driver: 'redfish', credentialRef: 'sec_…' }
 * ```
 */
export async function machineForStep(ctx: StepContext, stepId: string): Promise<MetalMachine> {
  const node = metalNode(ctx, stepId);
  const { rows } = await ctx.sql.query<MachineRow>(
    `SELECT m.tenant_id, m.site_id, m.bmc_address, m.bmc_driver, m.bmc_credential_ref, m.addresses,
            (SELECT w.document->'drivers' FROM workflows w WHERE w.id = $2) AS drivers
     FROM metal_machines m WHERE m.node_id = $1`,
    [node.id, ctx.workflowId],
  );
  const row = rows[0];
  if (!row) {
    throw new ComputeError(
      'INVALID_STATE',
      `${stepId}: node ${node.id} is not a machine metal knows (enroll it first)`,
      {
        details: { path: ['nodeId'], reason: 'not-enrolled' },
      },
    );
  }
  const credentialRef = typeof row.bmc_credential_ref === 'string' ? row.bmc_credential_ref : undefined;
  return {
    nodeId: node.id,
    tenantId: row.tenant_id,
    siteId: row.site_id,
    bmc: { address: row.bmc_address, driver: row.bmc_driver, ...(credentialRef ? { credentialRef } : {}) },
    addresses: row.addresses ?? [],
    drivers: row.drivers && typeof row.drivers === 'object' && !Array.isArray(row.drivers) ? row.drivers : {},
  };
}

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
 * destructive command twice to two agents; before that, `siteAgentFor` (the boot-lease holder first). With no agent
 * connected the step waits (`stepNotReady`), and fails NO_SITE_AGENT when its deadline is closer than one poll, as an
 * agent site step does.
 *
 * @example
 * ```ts
 * const agentId = await siteRelayAgent(ctx, machine, 'power');
 * ```
 */
export async function siteRelayAgent(ctx: StepContext, machine: MetalMachine, firstKey: string): Promise<string> {
  const key = `wf:${ctx.workflowId}:${ctx.stepId}#${ctx.attempt}:${firstKey}`;
  const { rows } = await ctx.sql.query<{ node_id: string }>(
    `SELECT c.node_id FROM commands c
     WHERE c.key = $2 AND c.node_id IN (SELECT n.id FROM nodes n WHERE n.site_id = $1 AND n.kind = 'site-agent')
     ORDER BY c.created_at LIMIT 1`,
    [machine.siteId, key],
  );
  if (rows[0]) return rows[0].node_id;
  const agent = await siteAgentFor(ctx.sql, machine.nodeId, ctx.clock);
  if (agent) return agent.nodeId;
  if (ctx.deadline.getTime() - ctx.clock.now().getTime() <= RELAY_POLL_MS) {
    throw new ComputeError('NO_SITE_AGENT', `no connected site agent served site ${machine.siteId}`, {
      details: { siteId: machine.siteId },
    });
  }
  throw stepNotReady(RELAY_POLL_MS);
}

/**
 * Sends one `driver.invoke` for `operation` (`<concern>.<operation>`) to the machine's site agent and waits for it:
 * `{ operation, driver, input, bmc }` with `targetNodeId` the machine, under the step's key `wf:<id>:<step>#<n>:<key>`.
 *
 * @example
 * ```ts
 * await invokeDriver(ctx, machine, { operation: 'power.setPower', input: { action: 'cycle' }, key: 'power' });
 * ```
 */
export async function invokeDriver(
  ctx: StepContext,
  machine: MetalMachine,
  call: { operation: string; input: Json; key: string; agentNodeId?: string; timeoutMs?: number },
): Promise<AwaitedCommand> {
  const agentNodeId = call.agentNodeId ?? (await siteRelayAgent(ctx, machine, call.key));
  const concern = call.operation.slice(0, call.operation.indexOf('.'));
  return awaitCommand(ctx, {
    nodeId: agentNodeId,
    kind: 'driver.invoke',
    key: call.key,
    targetNodeId: machine.nodeId,
    payload: {
      operation: call.operation,
      driver: driverBinding(machine, concern),
      input: call.input,
      bmc: bmcPayloadOf(machine.bmc),
    },
    ...(call.timeoutMs ? { timeoutMs: call.timeoutMs } : {}),
  });
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
