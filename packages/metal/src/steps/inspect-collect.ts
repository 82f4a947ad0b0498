import { isIP } from 'node:net';
import {
  type Command,
  ComputeError,
  type ErrorPath,
  type Json,
  type Labels,
  manifest,
  validateLabels,
} from '@better-compute/core';
import { checkJson } from '@better-compute/core/checks';
import { type CommandRow, type CommitChange, commit, toCommand } from '@better-compute/core/kernel';
import { awaitCommand, defineStep, type StepContext, stepCommandKey } from '@better-compute/provision';
import { checkInventory, type Inventory, inventoryLabels } from '../inventory/inventory';
import { METAL_MACHINE_PRELOAD_ID, preloadedMachine } from './machine-preload';
import { metalNode, RELAYED_COMMAND_POLL_MS, resultJson } from './relay';

/**
 * The label keys an inspection owns: set from the inventory, and removed when the inventory no longer supports them
 * (a GPU pulled, an NVSwitch board gone). Every other label is the operator's and is left alone.
 *
 * @example
 * ```ts
 * INVENTORY_LABEL_KEYS.includes('gpu.model'); // true
 * ```
 */
export const INVENTORY_LABEL_KEYS = Object.freeze([
  'gpu.model',
  'gpu.count',
  'mig.capable',
  'nvswitch',
  'ib.ports',
  'cpu.model',
  'cpu.cores',
  'memory.gib',
  'disk.count',
] as const);

/** The most addresses the control plane keeps for one machine. */
export const MAX_MACHINE_ADDRESSES = 32;

function refuse(message: string, path: ErrorPath): never {
  throw new ComputeError('INVALID_INPUT', message, { details: { path } });
}

/** The ramdisk's report: the inventory, plus the IP addresses it has (the ones `httpViaSite` may reach later). */
function parseReport(report: Json): { inventory: Inventory; addresses: string[] } {
  if (typeof report !== 'object' || report === null || Array.isArray(report)) {
    refuse('inspect.collect: the report must be an inventory object', ['result']);
  }
  const { addresses, ...rest } = report as Record<string, Json>;
  const found: string[] = [];
  if (addresses !== undefined) {
    if (!Array.isArray(addresses) || addresses.length > MAX_MACHINE_ADDRESSES) {
      refuse(`addresses must be a list of at most ${MAX_MACHINE_ADDRESSES} IP addresses`, ['result', 'addresses']);
    }
    addresses.forEach((address, i) => {
      if (typeof address !== 'string' || isIP(address) === 0) {
        refuse('an address must be an IPv4 or IPv6 address', ['result', 'addresses', i]);
      }
      found.push(address.toLowerCase());
    });
  }
  return { inventory: checkInventory(rest, ['result']), addresses: found };
}

/** How many times the inventory's write reads the node again when someone changed it meanwhile. */
const RECORD_TRIES = 5;

/** What the inventory's write starts from: the node's labels, facts and row version (`xmin`). */
interface NodeVersion {
  labels: Labels | null;
  facts: Record<string, Json> | null;
  version: string;
}

const NODE_VERSION_SQL = 'SELECT labels, facts, xmin::text AS version FROM nodes WHERE id = $1';

async function readNodeVersion(ctx: StepContext, nodeId: string): Promise<NodeVersion | undefined> {
  return (await ctx.sql.query<NodeVersion>(NODE_VERSION_SQL, [nodeId])).rows[0];
}

/**
 * One read per pass: the node as the inventory's write starts from it, with the step's command under `key` (null when
 * there is none yet), so the pass that gets the ramdisk's report reads once before it writes.
 */
async function readNodeAndCommand(
  ctx: StepContext,
  nodeId: string,
  key: string,
): Promise<{ node: NodeVersion | undefined; command: Command | null }> {
  // The command's columns are named apart from the node's three (labels, facts, version): `c.*` keeps its own.
  const { rows } = await ctx.sql.query<NodeVersion & Partial<CommandRow>>(
    `SELECT n.labels, n.facts, n.xmin::text AS version, c.*
     FROM nodes n LEFT JOIN commands c ON c.node_id = n.id AND c.key = $2 WHERE n.id = $1`,
    [nodeId, stepCommandKey(ctx, key)],
  );
  const row = rows[0];
  if (!row) return { node: undefined, command: null };
  const node = { labels: row.labels, facts: row.facts, version: row.version };
  return { node, command: typeof row.id === 'string' ? toCommand(row as CommandRow) : null };
}

/**
 * The same from what the claim read for the run (`ctx.preloads`): the command among this attempt's, and the node as
 * metal's preload read it in the same snapshot (undefined when it did not: then the write reads it).
 */
function preloadedNodeAndCommand(
  ctx: StepContext,
  commands: readonly Command[],
  nodeId: string,
  key: string,
): { node: NodeVersion | undefined; command: Command | null } {
  const full = stepCommandKey(ctx, key);
  const command = commands.find((c) => c.nodeId === nodeId && c.key === full) ?? null;
  return { node: preloadedMachine(ctx, nodeId)?.node ?? undefined, command };
}

/**
 * The inventory's write from the node as read (`current`: its labels, facts and row version, without a lock): the
 * node's facts and labels (the inspection's replaced, the operator's kept), the machine's known addresses and MACs.
 * The write applies only while the node's row is still that version: `requires` (held by the gate of whatever commit
 * carries it) locks the row at that version, so the commit writes nothing, not even the rest, if anyone wrote the node
 * meanwhile (an operator's `setLabels`). Returns the changes and the labels they write.
 */
function inventoryChanges(
  ctx: StepContext,
  nodeId: string,
  current: NodeVersion,
  inventory: Inventory,
  addresses: string[],
): { changes: [CommitChange, ...CommitChange[]]; labels: Labels } {
  const kept = Object.fromEntries(
    Object.entries(current.labels ?? {}).filter(([key]) => !(INVENTORY_LABEL_KEYS as readonly string[]).includes(key)),
  );
  const labels = validateLabels({ ...kept, ...inventoryLabels(inventory) }, ['labels'], 'INVALID_INPUT');
  const now = ctx.clock.now();
  const facts = { ...(current.facts ?? {}), inventory, inspectedAt: now.toISOString() };
  const issue = checkJson(facts, ['facts']);
  if (issue) refuse(`${issue.path.join('.')}: ${issue.message}`, issue.path);
  const changes: [CommitChange, ...CommitChange[]] = [
    {
      name: 'inventory_node',
      sql: ({ bind, guard }) =>
        `UPDATE nodes SET labels = ${bind(JSON.stringify(labels))}::jsonb, facts = ${bind(JSON.stringify(facts))}::jsonb,
           updated_at = ${bind(now)}
         WHERE id = ${bind(nodeId)} AND ${guard}
         RETURNING id`,
      requires: ({ bind }) =>
        `EXISTS (SELECT 1 FROM nodes WHERE id = ${bind(nodeId)} AND xmin::text = ${bind(current.version)} FOR UPDATE)`,
    },
    {
      name: 'inventory_addresses',
      sql: ({ bind, guard }) =>
        `UPDATE metal_machines SET addresses = (
           SELECT COALESCE(array_agg(DISTINCT a ORDER BY a), '{}'::text[])
           FROM unnest(addresses || ${bind(addresses)}::text[]) AS a), updated_at = ${bind(now)}
         WHERE node_id = ${bind(nodeId)} AND ${guard}`,
    },
    {
      name: 'inventory_macs',
      sql: ({ bind, guard }) =>
        `INSERT INTO metal_macs (mac, node_id) SELECT m, ${bind(nodeId)} FROM unnest(${bind(inventory.macs)}::text[]) AS m
         WHERE ${guard} ON CONFLICT (mac) DO NOTHING`,
    },
  ];
  return { changes, labels };
}

function nodeMissing(nodeId: string): ComputeError {
  return new ComputeError('NOT_FOUND', `node ${nodeId} not found`, { details: { path: ['nodeId'] } });
}

/**
 * What the claim read of the machine for a run (metal's preload) as the inventory's write leaves it: the reported
 * addresses known too. Left out for the run to read: the MACs (a reported one another machine holds is not added),
 * the node's version and the machine's lifecycle columns (the write changes both rows).
 */
function machineReadAfter(addresses: readonly string[]) {
  return (reads: Readonly<Record<string, Json>>): Record<string, Json> => {
    const machine = reads[METAL_MACHINE_PRELOAD_ID];
    if (typeof machine !== 'object' || machine === null || Array.isArray(machine)) return { ...reads };
    const { macs: _macs, node: _node, lifecycle: _lifecycle, ...kept } = machine;
    const known = Array.isArray(kept.addresses) ? kept.addresses.filter((a) => typeof a === 'string') : [];
    const all = [...new Set([...known, ...addresses])].sort();
    return { ...reads, [METAL_MACHINE_PRELOAD_ID]: { ...kept, addresses: all } };
  };
}

/**
 * Writes the inventory (see {@link inventoryChanges}) by one statement of its own, fenced by the worker's lease,
 * reading the node again and writing again when it changed meanwhile (CONFLICT after {@link RECORD_TRIES}). Returns the
 * labels written.
 */
async function recordInventory(
  ctx: StepContext,
  nodeId: string,
  first: NodeVersion | undefined,
  inventory: Inventory,
  addresses: string[],
): Promise<Labels> {
  let current = first;
  for (let tries = 1; ; tries += 1) {
    if (!current) throw nodeMissing(nodeId);
    const { changes, labels } = inventoryChanges(ctx, nodeId, current, inventory, addresses);
    const written = await commit(ctx, { changes });
    if (written.status === 'committed') return labels;
    if (tries >= RECORD_TRIES) {
      throw new ComputeError(
        'CONFLICT',
        `inspect.collect: node ${nodeId} kept changing while its inventory was written`,
        { details: { path: ['nodeId'] } },
      );
    }
    // The row's version with what it holds: any write to the node since then makes the guarded update stale.
    current = await readNodeVersion(ctx, nodeId);
  }
}

/**
 * The inventory written with the step's result (`ctx.writeWithResult`): by the engine's statement that records the
 * step succeeded and starts what follows, so the report's result is followed by one statement fewer. When the node
 * changed since it was read, that statement writes nothing and the step runs again, reading it anew; `write(tx)` (for
 * a caller that cannot take changes) writes it alone, CONFLICT when the node changed. Returns the labels it writes.
 */
function inventoryWithResult(
  ctx: StepContext,
  writeWithResult: NonNullable<StepContext['writeWithResult']>,
  nodeId: string,
  current: NodeVersion | undefined,
  inventory: Inventory,
  addresses: string[],
): Labels {
  if (!current) throw nodeMissing(nodeId);
  const { changes, labels } = inventoryChanges(ctx, nodeId, current, inventory, addresses);
  writeWithResult({
    changes,
    // The labels it writes whole (its requires lock the node's row at the version it read), so the engine starts what
    // follows in the same statement, and what a next step's run reads of the machine as it leaves it.
    leaves: { nodeLabels: labels, runReads: machineReadAfter(addresses) },
    async write(tx) {
      const written = await commit({ ...ctx, sql: tx }, { changes }, tx);
      if (written.status !== 'committed') {
        throw new ComputeError('CONFLICT', `inspect.collect: node ${nodeId} changed while its inventory was written`, {
          details: { path: ['nodeId'] },
        });
      }
    },
  });
  return labels;
}

/**
 * `inspect.collect`: asks the ramdisk for the machine's hardware inventory (one `inspect.collect` command to the
 * machine, key `:inventory`) and records it with its result (the engine's statement that settles the step writes it,
 * see {@link inventoryWithResult}): the inventory becomes the node's `facts.inventory`
 * (with `facts.inspectedAt`); its labels (`gpu.model`, `gpu.count`, `mig.capable`, `nvswitch`, `ib.ports`,
 * `cpu.model`, `cpu.cores`, `memory.gib`, `disk.count`) replace the inspection's labels of before while every other
 * label (the operator's) stays; the addresses it reports join the machine's known addresses, and its MACs the
 * machine's MACs (one no other machine holds). A report that fails {@link checkInventory} fails the step
 * INVALID_INPUT at its path under `result`, and nothing is written. Returns `{ commandId, labels, gpus }`.
 *
 * @example
 * ```ts
 * const steps = [{ use: 'metal.ensureRamdisk' }, { use: 'inspect.collect', on: 'ramdisk' }];
 * ```
 */
export const inspectCollect = defineStep({
  id: 'inspect.collect',
  runsOn: 'control-plane',
  relays: ['ramdisk'],
  sends: ['inspect.collect'],
  timeout: '15m',
  retrySafe: true,
  input: manifest({}),
  description: "Collects the machine's hardware inventory from the ramdisk into node facts and labels.",
  async run(_input, ctx) {
    const node = metalNode(ctx, 'inspect.collect');
    const preloaded = ctx.preloads?.commands;
    const read = preloaded
      ? preloadedNodeAndCommand(ctx, preloaded, node.id, 'inventory')
      : await readNodeAndCommand(ctx, node.id, 'inventory');
    const sent = await awaitCommand(ctx, {
      nodeId: node.id,
      kind: 'inspect.collect',
      payload: {},
      key: 'inventory',
      pollMs: RELAYED_COMMAND_POLL_MS,
      found: read.command,
    });
    const { inventory, addresses } = parseReport(resultJson(sent, 'inspect.collect'));
    // The node as read with the command, unless the command was still open then (awaitCommand read it again, as
    // due): then the node is read again too, so the write starts from a version no older than the command's result.
    const first = read.command?.state === 'succeeded' && read.node ? read.node : await readNodeVersion(ctx, node.id);
    const labels = ctx.writeWithResult
      ? inventoryWithResult(ctx, ctx.writeWithResult, node.id, first, inventory, addresses)
      : await recordInventory(ctx, node.id, first, inventory, addresses);
    return { commandId: sent.commandId, labels, gpus: inventory.gpus.length };
  },
});
