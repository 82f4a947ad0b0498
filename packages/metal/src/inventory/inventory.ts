import {
  type ErrorPath,
  field,
  type Labels,
  labelValueProblem,
  manifest,
  validateInputSync,
} from '@better-compute/core';
import { refuseInput } from '@better-compute/core/checks';

const MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;

/**
 * The hardware inventory a ramdisk reports (`inspect.collect`). It comes from an agent, so it is input like any
 * other: checked, bounded, and refused at the offending path.
 *
 * @example
 * ```ts
 * const inventory = checkInventory(report); // INVALID_INPUT at ['gpus', 3, 'model'] for a bad one
 * ```
 */
export const inventorySchema = manifest({
  cpu: field.object({
    model: field.string({ minLength: 1, maxLength: 200 }),
    sockets: field.int({ min: 1, max: 64 }),
    cores: field.int({ min: 1, max: 65_536 }),
  }),
  memoryMiB: field.int({ min: 1, max: 2 ** 31 - 1 }),
  gpus: field
    .array(
      field.object({
        model: field.string({ minLength: 1, maxLength: 200 }),
        uuid: field.string({ minLength: 1, maxLength: 200 }),
        memoryMiB: field.int({ min: 0, max: 2 ** 31 - 1 }).optional(),
        migCapable: field.boolean().default(false),
      }),
      { maxItems: 64 },
    )
    .default([]),
  nvswitches: field.int({ min: 0, max: 64 }).default(0),
  infiniband: field
    .array(
      field.object({
        port: field.string({ minLength: 1, maxLength: 64 }),
        rateGbps: field.int({ min: 0, max: 100_000 }).optional(),
      }),
      { maxItems: 64 },
    )
    .default([]),
  disks: field
    .array(
      field.object({
        device: field.string({ minLength: 1, maxLength: 200 }),
        sizeBytes: field.number({ min: 0, max: Number.MAX_SAFE_INTEGER }),
        rotational: field.boolean().default(false),
      }),
      { maxItems: 256 },
    )
    .default([]),
  macs: field.array(field.string({ minLength: 17, maxLength: 17 }), { minItems: 1, maxItems: 64 }),
});

/** An inventory that passed {@link checkInventory}. */
export type Inventory = ReturnType<typeof checkInventory>;

/**
 * Checks an agent's inventory report against {@link inventorySchema} (INVALID_INPUT at the path of the first issue,
 * every issue listed), refuses a MAC that is not six colon-separated octets (normalised to lower case) and a model
 * that could not be a label value (a control character).
 *
 * @example
 * ```ts
 * checkInventory({ cpu: { model: 'EPYC', sockets: 2, cores: 128 }, memoryMiB: 2_097_152, macs: ['AA:BB:CC:00:11:22'] });
 * ```
 */
export function checkInventory(report: unknown, path: ErrorPath = []) {
  const inventory = validateInputSync(inventorySchema, report, path);
  const macs = inventory.macs.map((mac, index) => {
    const lower = mac.toLowerCase();
    if (!MAC.test(lower)) refuseInput('a MAC must be six colon-separated hex octets', [...path, 'macs', index]);
    return lower;
  });
  // Models become label values: a control character there would break every selector and terminal that shows it.
  inventory.gpus.forEach((gpu, index) => {
    if (labelValueProblem(gpu.model))
      refuseInput('a GPU model must be printable text', [...path, 'gpus', index, 'model']);
  });
  if (labelValueProblem(inventory.cpu.model))
    refuseInput('a CPU model must be printable text', [...path, 'cpu', 'model']);
  return { ...inventory, macs };
}

/**
 * The labels an inspection sets from an inventory, for `when` and selectors (`nvswitch && gpu.model=H100`,
 * `!mig.capable`): `gpu.model` (the model every GPU shares, or `mixed`), `gpu.count`, `mig.capable` (every GPU can),
 * `nvswitch`, `ib.ports`, `cpu.model`, `cpu.cores`, `memory.gib`, `disk.count`. A fact that does not hold is left
 * out (no `nvswitch` label rather than `nvswitch=false`), so `!nvswitch` reads as an operator expects.
 *
 * @example
 * ```ts
 * inventoryLabels(inventory); // { 'gpu.model': 'H100', 'gpu.count': '8', nvswitch: 'true', … }
 * ```
 */
export function inventoryLabels(inventory: Inventory): Labels {
  const labels: Record<string, string> = {
    'gpu.count': String(inventory.gpus.length),
    'cpu.model': inventory.cpu.model,
    'cpu.cores': String(inventory.cpu.cores),
    'memory.gib': String(Math.floor(inventory.memoryMiB / 1024)),
    'disk.count': String(inventory.disks.length),
  };
  const models = new Set(inventory.gpus.map((gpu) => gpu.model));
  if (models.size === 1) labels['gpu.model'] = [...models][0] as string;
  if (models.size > 1) labels['gpu.model'] = 'mixed';
  if (inventory.gpus.length > 0 && inventory.gpus.every((gpu) => gpu.migCapable)) labels['mig.capable'] = 'true';
  if (inventory.nvswitches > 0) labels.nvswitch = 'true';
  if (inventory.infiniband.length > 0) labels['ib.ports'] = String(inventory.infiniband.length);
  return labels;
}
