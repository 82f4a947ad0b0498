import { type Command, ComputeError, type Json } from '@better-compute/core';
import { commandFromJson, commandJsonSql } from '@better-compute/core/kernel';
import { type StepContext, stepCommandKey } from '@better-compute/provision';
import { metalMachinePreload, type PreloadedMachine, preloadedMachine } from './machine-preload';

/** A machine's BMC as a site agent needs it: the address, the driver name and the reference to its credential. */
export interface MachineBmc {
  address: string;
  driver: string;
  credentialRef?: string;
}

/**
 * What a relaying step's read found of its own commands, this attempt: every command under the keys it asked for, on
 * any site agent of the machine's site (oldest first), and each agent's tenant.
 */
export interface RelaySent {
  /** The step-level keys looked for (`'power'`, `'boot-entry:0c:42:…'`), as `awaitCommand` takes them. */
  readonly keys: ReadonlySet<string>;
  readonly commands: readonly Command[];
  /** The tenant of every site agent of the machine's site. */
  readonly agentTenants: ReadonlyMap<string, string>;
  /** The site agent a first command would go to (the boot-lease holder first), undefined when none is connected. */
  readonly connectedAgentId: string | undefined;
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
  /** The machine's MACs (sorted), when the read asked for them (`macs` or `perMac`). */
  macs?: string[];
  /** When the workflow started (its creation while it has not), when the read asked for commands or MACs. */
  workflowStartedAt?: Date;
  /** The step's commands the read found, when it asked for any (`keys`, `perMac`). */
  sent?: RelaySent;
  /** The machine's agent's connected session (null: none), when the read asked for it (`session`). */
  session?: MachineSession | null;
}

/** The machine's agent's connected session, as a relaying step waits on it (a ramdisk joining, an OS rejoining). */
export interface MachineSession {
  bootId: string | null;
  role: string | null;
  connectedAt: Date;
}

/** What else {@link machineForStep} reads with the machine, in the same statement. */
export interface MachineReadOptions {
  /** Command keys of this step attempt to look for (as `awaitCommand`'s `key`). */
  keys?: readonly string[];
  /** Also look for `<perMac><mac>` for each of the machine's MACs (and read the MACs). */
  perMac?: string;
  /** Read the machine's MACs. */
  macs?: boolean;
  /** Read the machine's agent's connected session (`currentAgentSession`'s answer), as `session`. */
  session?: boolean;
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
 * Reads the workflow's machine (its BMC, site, owner and known addresses, MACs, the pinned profile's `drivers`, when
 * the workflow started, the machine's agent session, where a first command would go) and the commands this step
 * attempt already sent under the keys `options` names, so a relaying step's pass reads at most once whatever it sent:
 * nothing when the claim read it for the run (metal's workflow preload and the attempt's commands), else one
 * statement (the same preload SQL, at the run's now). A node metal does not know is INVALID_STATE
 * (`reason: 'not-enrolled'`): only an enrolled or adopted machine has a BMC to drive.
 *
 * @example
 * ```ts
 * const machine = await machineForStep(ctx, 'power.setPower', { keys: ['power'] });
 * machine.bmc; // { address: '10.1.0.7', driver: 'redfish', credentialRef: 'sec_…' }
 * ```
 */
export async function machineForStep(
  ctx: StepContext,
  stepId: string,
  options: MachineReadOptions = {},
): Promise<MetalMachine> {
  const node = metalNode(ctx, stepId);
  const preloaded = preloadedMachine(ctx, node.id);
  const attemptCommands = ctx.preloads?.commands;
  // A preload a write with an earlier step's result left without the MACs (see inspect.collect) cannot answer for them.
  const needsMacs = options.macs === true || options.perMac !== undefined;
  if (preloaded && attemptCommands && !(needsMacs && preloaded.macs === undefined)) {
    return machineFrom(ctx, preloaded, attemptCommands, options);
  }
  // Not claimed with a preload: the same read in a statement of its own, for this workflow at the run's now, with
  // the commands of this attempt under the keys asked for on the site's agents (the unique (node_id, key) index finds
  // each; a per-MAC key for each of the machine's MACs).
  const keys = (options.keys ?? []).map((key) => stepCommandKey(ctx, key));
  const perMac = options.perMac === undefined ? null : stepCommandKey(ctx, options.perMac);
  const sent = `(SELECT coalesce(json_agg(${commandJsonSql('c')}), '[]'::json) FROM nodes a JOIN commands c ON c.node_id = a.id
    WHERE a.site_id = (SELECT site_id FROM metal_machines WHERE node_id = $1) AND a.kind = 'site-agent'
      AND c.key = ANY($4::text[] || ARRAY(SELECT $5::text || x.mac FROM metal_macs x
        WHERE $5::text IS NOT NULL AND x.node_id = $1)))`;
  const { rows } = await ctx.sql.query<{ machine: PreloadedMachine | null; sent: unknown[] }>(
    `SELECT ${metalMachinePreload.sql({ workflow: 'w', now: '$3::timestamptz' })} AS machine, ${sent} AS sent
     FROM (SELECT $1::text AS node_id, $2::text AS id, wf.document, wf.started_at, wf.created_at
           FROM (SELECT 1) one LEFT JOIN workflows wf ON wf.id = $2) w`,
    [node.id, ctx.workflowId, ctx.clock.now(), keys, perMac],
  );
  const read = rows[0]?.machine;
  if (!read) {
    throw new ComputeError(
      'INVALID_STATE',
      `${stepId}: node ${node.id} is not a machine metal knows (enroll it first)`,
      {
        details: { path: ['nodeId'], reason: 'not-enrolled' },
      },
    );
  }
  const commands = (rows[0]?.sent ?? []).map(commandFromJson).filter((c): c is Command => c !== undefined);
  return machineFrom(ctx, read, commands, options);
}

/**
 * The machine as {@link machineForStep} returns it, from metal's workflow preload (read by the claim, or by the step
 * itself) and the attempt's commands: the commands kept are those under the keys asked for on the site's agents, and
 * `agentTenants` names every agent of the site.
 */
function machineFrom(
  ctx: StepContext,
  found: PreloadedMachine,
  attemptCommands: readonly Command[],
  options: MachineReadOptions,
): MetalMachine {
  const keys = [...(options.keys ?? [])];
  const readsSent = keys.length > 0 || options.perMac !== undefined;
  const readsMacs = options.macs === true || options.perMac !== undefined;
  const credentialRef = typeof found.bmcCredentialRef === 'string' ? found.bmcCredentialRef : undefined;
  const drivers = found.drivers;
  const macs = readsMacs ? [...(found.macs ?? [])] : undefined;
  const machine: MetalMachine = {
    nodeId: found.nodeId,
    tenantId: found.tenantId,
    siteId: found.siteId,
    bmc: { address: found.bmcAddress, driver: found.bmcDriver, ...(credentialRef ? { credentialRef } : {}) },
    addresses: found.addresses ?? [],
    drivers: drivers && typeof drivers === 'object' && !Array.isArray(drivers) ? drivers : {},
    ...(macs ? { macs } : {}),
  };
  if (readsMacs || readsSent) machine.workflowStartedAt = new Date(found.workflowStartedAt ?? 0);
  if (options.session) {
    const session = found.session;
    machine.session = session
      ? { bootId: session.bootId, role: session.role, connectedAt: new Date(session.connectedAt) }
      : null;
  }
  if (readsSent) {
    const perMac = options.perMac;
    const stepKeys = [...keys, ...(perMac === undefined ? [] : (macs ?? []).map((mac) => `${perMac}${mac}`))];
    const fullKeys = new Set(stepKeys.map((key) => stepCommandKey(ctx, key)));
    const agents = found.siteAgents ?? {};
    const commands = attemptCommands
      .filter((c) => fullKeys.has(c.key) && Object.hasOwn(agents, c.nodeId))
      .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || a.id.localeCompare(b.id));
    machine.sent = {
      keys: new Set(stepKeys),
      commands,
      agentTenants: new Map(Object.entries(agents)),
      connectedAgentId: found.connectedAgentId ?? undefined,
    };
  }
  return machine;
}

/**
 * What the machine's read found under a step-level `key` on `agentNodeId`: the command, `null` when the read looked
 * and found none, `undefined` when it did not look for that key (then `awaitCommand` looks it up itself).
 *
 * @example
 * ```ts
 * await awaitCommand(ctx, { nodeId, kind, payload, key, found: sentCommand(ctx, machine, nodeId, key) });
 * ```
 */
export function sentCommand(
  ctx: Pick<StepContext, 'workflowId' | 'stepId' | 'attempt'>,
  machine: MetalMachine,
  agentNodeId: string,
  key: string,
): Command | null | undefined {
  if (!machine.sent?.keys.has(key)) return undefined;
  const full = stepCommandKey(ctx, key);
  return machine.sent.commands.find((c) => c.key === full && c.nodeId === agentNodeId) ?? null;
}
