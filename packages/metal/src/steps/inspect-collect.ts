import { isIP } from 'node:net';
import { ComputeError, type ErrorPath, type Json, manifest } from '@better-compute/core';
import { getNode, setNodeFacts, setNodeLabels } from '@better-compute/core/nodes';
import { awaitCommand, defineStep } from '@better-compute/provision';
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

/**
 * `inspect.collect`: asks the ramdisk for the machine's hardware inventory (one `inspect.collect` command to the
 * machine, key `:inventory`) and records it, in one transaction: the inventory becomes the node's `facts.inventory`
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
    const found = inventoryLabels(inventory);
    const now = ctx.clock.now();
    const labels = await ctx.sql.transaction(async (tx) => {
      const current = await getNode(tx, node.id, { forUpdate: true });
      if (!current) throw new ComputeError('NOT_FOUND', `node ${node.id} not found`, { details: { path: ['nodeId'] } });
      const kept = Object.fromEntries(
        Object.entries(current.labels ?? {}).filter(
          ([key]) => !(INVENTORY_LABEL_KEYS as readonly string[]).includes(key),
        ),
      );
      const next = { ...kept, ...found };
      // The four writes go out together (the driver pipelines them on the transaction's connection): they sit between
      // the inventory's result and the next command. All of them settle before the transaction ends either way.
      const written = await Promise.allSettled([
        setNodeLabels(tx, node.id, next, now),
        setNodeFacts(tx, node.id, { ...(current.facts ?? {}), inventory, inspectedAt: now.toISOString() }, now),
        tx.query(
          `UPDATE metal_machines SET addresses = (
             SELECT COALESCE(array_agg(DISTINCT a ORDER BY a), '{}'::text[])
             FROM unnest(addresses || $2::text[]) AS a), updated_at = $3
           WHERE node_id = $1`,
          [node.id, addresses, now],
        ),
        tx.query(
          `INSERT INTO metal_macs (mac, node_id) SELECT m, $1 FROM unnest($2::text[]) AS m ON CONFLICT (mac) DO NOTHING`,
          [node.id, inventory.macs],
        ),
      ]);
      for (const outcome of written) if (outcome.status === 'rejected') throw outcome.reason;
      return next;
    });
    return { commandId: sent.commandId, labels, gpus: inventory.gpus.length };
  },
});
