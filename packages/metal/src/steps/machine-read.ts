import { type Command, ComputeError, type Json } from '@better-compute/core';
import {
  type CommandRow,
  connectedSiteAgentSql,
  DEFAULT_SESSION_STALE_AFTER_MS,
  toCommand,
} from '@better-compute/core/kernel';
import { type StepContext, stepCommandKey } from '@better-compute/provision';
import { type PreloadedMachine, preloadedMachine } from './machine-preload';

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
  /** The tenant of each agent a command was found on (of every agent of the site, when the claim read them). */
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

type MachineRow = Partial<CommandRow> & {
  machine_tenant_id: string;
  machine_site_id: string;
  bmc_address: string;
  bmc_driver: string;
  bmc_credential_ref: unknown;
  addresses: string[] | null;
  drivers: Record<string, Json> | null;
  workflow_started_at: Date | string | null;
  macs: string[] | null;
  agent_tenant_id: string | null;
  machine_session?: { bootId: string | null; role: string | null; connectedAt: string } | null;
  connected_agent_id: string | null;
};

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

// The commands of this attempt under the keys asked for, on the site's agents only (the unique (node_id, key) index
// finds each), with the agent's tenant; a row per command, or one with no command.
function sentJoin(perMac: boolean): string {
  const macKeys = perMac ? ` || ARRAY(SELECT $4::text || x.mac FROM metal_macs x WHERE x.node_id = m.node_id)` : '';
  return `LEFT JOIN LATERAL (
       SELECT a.tenant_id AS agent_tenant_id, c.* FROM nodes a JOIN commands c ON c.node_id = a.id
       WHERE a.site_id = m.site_id AND a.kind = 'site-agent' AND c.key = ANY($3::text[]${macKeys})
     ) c ON TRUE`;
}

/**
 * Reads the workflow's machine from `metal_machines` (its BMC, site, owner and known addresses) with the pinned
 * profile's `drivers`, in one statement; with `options`, the same statement also reads the machine's MACs, when the
 * workflow started, and the commands this step attempt already sent under the keys it names, so a relaying step's
 * pass is one read whatever it sent. A node metal does not know is INVALID_STATE (`reason: 'not-enrolled'`): only an
 * enrolled or adopted machine has a BMC to drive.
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
  if (preloaded && attemptCommands) return machineFrom(ctx, preloaded, attemptCommands, options);
  const keys = [...(options.keys ?? [])];
  const readsSent = keys.length > 0 || options.perMac !== undefined;
  const readsMacs = options.macs === true || options.perMac !== undefined;
  const params: unknown[] = [node.id, ctx.workflowId];
  const bind = (value: unknown) => `$${params.push(value)}`;
  if (readsSent) params.push(keys.map((key) => stepCommandKey(ctx, key)));
  if (options.perMac !== undefined) params.push(stepCommandKey(ctx, options.perMac));
  // Where a first command would go, read with the rest: a pass that sends needs no read of its own for it.
  const connected = readsSent ? connectedSiteAgentSql('m.site_id', { now: ctx.clock.now() }, bind) : undefined;
  // The session as currentAgentSession finds it (open, seen within the default freshness), read with the rest.
  const session = options.session
    ? `, (SELECT json_build_object('bootId', s.boot_id, 'role', s.role, 'connectedAt', s.connected_at)
         FROM agent_sessions s WHERE s.node_id = m.node_id AND s.closed_at IS NULL
           AND s.last_seen_at > ${bind(new Date(ctx.clock.now().getTime() - DEFAULT_SESSION_STALE_AFTER_MS))}::timestamptz
         ORDER BY s.connected_at DESC, s.id DESC LIMIT 1) AS machine_session`
    : '';
  const { rows } = await ctx.sql.query<MachineRow>(
    `SELECT m.tenant_id AS machine_tenant_id, m.site_id AS machine_site_id, m.bmc_address, m.bmc_driver,
            m.bmc_credential_ref, m.addresses, w.document->'drivers' AS drivers,
            COALESCE(w.started_at, w.created_at) AS workflow_started_at,
            ${readsMacs ? 'ARRAY(SELECT x.mac FROM metal_macs x WHERE x.node_id = m.node_id ORDER BY x.mac)' : 'NULL::text[]'} AS macs${session}
            ${connected ? `, (${connected}) AS connected_agent_id, c.*` : ''}
     FROM metal_machines m LEFT JOIN workflows w ON w.id = $2
     ${readsSent ? sentJoin(options.perMac !== undefined) : ''}
     WHERE m.node_id = $1`,
    params,
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
  const found = rows.filter((r) => typeof r.id === 'string') as (MachineRow & CommandRow)[];
  const read: PreloadedMachine = {
    nodeId: node.id,
    tenantId: row.machine_tenant_id,
    siteId: row.machine_site_id,
    bmcAddress: row.bmc_address,
    bmcDriver: row.bmc_driver,
    bmcCredentialRef: row.bmc_credential_ref,
    addresses: row.addresses,
    drivers: row.drivers,
    workflowStartedAt: row.workflow_started_at === null ? null : new Date(row.workflow_started_at).toISOString(),
    macs: row.macs,
    connectedAgentId: row.connected_agent_id,
    siteAgents: Object.fromEntries(found.map((r) => [r.node_id, r.agent_tenant_id ?? row.machine_tenant_id])),
    session: row.machine_session ?? null,
  };
  return machineFrom(ctx, read, found.map(toCommand), options);
}

/**
 * The machine as {@link machineForStep} returns it, from its own read or from what the claim read for the run (metal's
 * workflow preload, and the attempt's commands): the commands kept are those under the keys asked for on the site's
 * agents, and `agentTenants` names every agent `found.siteAgents` lists (the claim lists the whole site's, the read
 * those a command was found on).
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
