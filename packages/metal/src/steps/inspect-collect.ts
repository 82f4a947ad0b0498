import { isIP } from 'node:net';
import { ComputeError, type ErrorPath, type Json, type Labels, manifest, validateLabels } from '@better-compute/core';
import { checkJson } from '@better-compute/core/checks';
import { commit } from '@better-compute/core/kernel';
import { awaitCommand, defineStep, type StepContext } from '@better-compute/provision';
import { checkInventory, type Inventory, inventoryLabels } from '../inventory/inventory';
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

/**
 * Writes the inventory (facts, the inspection's labels, known addresses, MACs) in one statement, fenced by the
 * worker's lease: the node is read first (its labels, facts and row version, without a lock), the write applies only
 * if the row is still the version read, and the node is read and written again otherwise (an operator's `setLabels`
 * meanwhile). Between the inventory's result and the next command that is two round trips, where a transaction took
 * seven (begin, lease check, locked read, four writes, commit). Returns the labels written.
 */
async function recordInventory(
  ctx: StepContext,
  nodeId: string,
  inventory: Inventory,
  addresses: string[],
): Promise<Labels> {
  const found = inventoryLabels(inventory);
  for (let tries = 1; ; tries += 1) {
    // The row's version (xmin) with what it holds: any write to the node since then makes the guarded update stale.
    const { rows } = await ctx.sql.query<{
      labels: Labels | null;
      facts: Record<string, Json> | null;
      version: string;
    }>('SELECT labels, facts, xmin::text AS version FROM nodes WHERE id = $1', [nodeId]);
    const current = rows[0];
    if (!current) throw new ComputeError('NOT_FOUND', `node ${nodeId} not found`, { details: { path: ['nodeId'] } });
    const kept = Object.fromEntries(
      Object.entries(current.labels ?? {}).filter(
        ([key]) => !(INVENTORY_LABEL_KEYS as readonly string[]).includes(key),
      ),
    );
    const labels = validateLabels({ ...kept, ...found }, ['labels'], 'INVALID_INPUT');
    const now = ctx.clock.now();
    const facts = { ...(current.facts ?? {}), inventory, inspectedAt: now.toISOString() };
    const issue = checkJson(facts, ['facts']);
    if (issue) refuse(`${issue.path.join('.')}: ${issue.message}`, issue.path);
    const written = await commit(ctx, {
      changes: [
        {
          name: 'inventory_node',
          sql: ({ bind, guard }) =>
            `UPDATE nodes SET labels = ${bind(JSON.stringify(labels))}::jsonb, facts = ${bind(JSON.stringify(facts))}::jsonb,
               updated_at = ${bind(now)}
             WHERE id = ${bind(nodeId)} AND xmin::text = ${bind(current.version)} AND ${guard}
             RETURNING id`,
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
      ],
    });
    if (written.status === 'committed') return labels;
    if (tries >= RECORD_TRIES) {
      throw new ComputeError(
        'CONFLICT',
        `inspect.collect: node ${nodeId} kept changing while its inventory was written`,
        {
          details: { path: ['nodeId'] },
        },
      );
    }
  }
}

/**
 * `inspect.collect`: asks the ramdisk for the machine's hardware inventory (one `inspect.collect` command to the
 * machine, key `:inventory`) and records it, in one statement: the inventory becomes the node's `facts.inventory`
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
    const sent = await awaitCommand(ctx, {
      nodeId: node.id,
      kind: 'inspect.collect',
      payload: {},
      key: 'inventory',
      pollMs: RELAYED_COMMAND_POLL_MS,
    });
    const { inventory, addresses } = parseReport(resultJson(sent, 'inspect.collect'));
    const labels = await recordInventory(ctx, node.id, inventory, addresses);
    return { commandId: sent.commandId, labels, gpus: inventory.gpus.length };
  },
});
