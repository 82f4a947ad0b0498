import { ComputeError, field, manifest } from '@better-compute/core';
import { getNode } from '@better-compute/core/nodes';
import { awaitCommand, defineStep } from '@better-compute/provision';
import { metalNode, RELAYED_COMMAND_POLL_MS, relayed, resultJson } from './relay';

function refuseResult(message: string, commandId: string, reason: string): never {
  throw new ComputeError('DRIVER_ERROR', `disk.wipe: ${message}`, { details: { commandId, reason } });
}

/**
 * `disk.wipe`: wipes the machine's disks from the ramdisk (`disk.wipe { mode }`, destructive, key `:wipe`) and accepts
 * the result only once it is verified: it must be signed with the machine's own, current key (`ctx.attestation`, the
 * attested-result verifier port pki provides), and its signed bytes must be the JSON `{ commandId, wiped: true, … }`
 * naming this very command (so a signed result of an earlier wipe cannot be replayed). A tampered, unsigned or other
 * node's result, or one that does not say so, fails DRIVER_ERROR with `details.reason`. Without the port the step
 * refuses INVALID_CONFIG before anything is wiped. Returns `{ commandId, result, certificateSerial }`.
 *
 * @example
 * ```ts
 * const steps = [{ use: 'metal.ensureRamdisk' }, { use: 'disk.wipe', on: 'ramdisk', with: { mode: 'secure' } }];
 * ```
 */
export const diskWipe = defineStep({
  id: 'disk.wipe',
  runsOn: 'control-plane',
  relays: ['ramdisk'],
  sends: ['disk.wipe'],
  timeout: '4h',
  retrySafe: true,
  input: manifest({
    mode: field.enum(['quick', 'secure']).default('quick').describe('quick: signatures; secure: all.'),
  }),
  description: "Wipes the machine's disks and verifies the machine-signed result.",
  async run(input, ctx) {
    const node = metalNode(ctx, 'disk.wipe');
    const attestation = ctx.attestation;
    if (!attestation) {
      throw new ComputeError(
        'INVALID_CONFIG',
        "disk.wipe verifies the machine's signed result: pass attestation to betterCompute (pki's attestation())",
        { details: { path: ['attestation'] } },
      );
    }
    const sent = await awaitCommand(ctx, {
      nodeId: node.id,
      kind: 'disk.wipe',
      key: 'wipe',
      pollMs: RELAYED_COMMAND_POLL_MS,
      payload: { mode: input.mode },
    });
    const verified = await attestation.verify(ctx.sql, {
      nodeId: node.id,
      result: sent.result ?? new Uint8Array(),
      attested: sent.attested ?? null,
    });
    const report = resultJson(sent, 'disk.wipe') as { commandId?: unknown; wiped?: unknown } | null;
    if (report?.commandId !== sent.commandId) {
      refuseResult('the signed result names another command', sent.commandId, 'result-replayed');
    }
    if (report.wiped !== true) refuseResult('the machine did not report its disks wiped', sent.commandId, 'not-wiped');
    return { ...relayed(sent, 'disk.wipe'), certificateSerial: verified.certificateSerial };
  },
});

/**
 * `health.resetGpus`: resets the machine's GPUs from its daemon (`health.resetGpus { gpus? }`, destructive, key
 * `:reset`). A relaying step so it can check first: every listed UUID must be a GPU the machine's inventory
 * (`facts.inventory.gpus`) holds, or it is INVALID_INPUT at `['with', 'gpus', i]` and nothing is sent. No list resets
 * them all.
 *
 * @example
 * ```ts
 * const step = { use: 'health.resetGpus', on: 'node', with: { gpus: ['GPU-6f1c…'] } };
 * ```
 */
export const resetGpus = defineStep({
  id: 'health.resetGpus',
  runsOn: 'control-plane',
  relays: ['node'],
  sends: ['health.resetGpus'],
  timeout: '15m',
  retrySafe: true,
  input: manifest({
    gpus: field
      .array(field.string({ minLength: 1, maxLength: 128 }), { maxItems: 64 })
      .optional()
      .describe('GPU UUIDs to reset; all when left out.'),
  }),
  description: "Resets the machine's GPUs (all, or the listed UUIDs of its inventory).",
  async run(input, ctx) {
    const node = metalNode(ctx, 'health.resetGpus');
    if (input.gpus !== undefined) {
      const row = await getNode(ctx.sql, node.id);
      const inventory = (row?.facts as { inventory?: { gpus?: { uuid?: unknown }[] } } | undefined)?.inventory;
      const known = new Set((inventory?.gpus ?? []).map((gpu) => gpu.uuid));
      input.gpus.forEach((uuid, i) => {
        if (!known.has(uuid)) {
          throw new ComputeError('INVALID_INPUT', `health.resetGpus: ${uuid} is not a GPU of this machine`, {
            details: { path: ['with', 'gpus', i] },
          });
        }
      });
    }
    const sent = await awaitCommand(ctx, {
      nodeId: node.id,
      kind: 'health.resetGpus',
      key: 'reset',
      pollMs: RELAYED_COMMAND_POLL_MS,
      payload: input.gpus === undefined ? {} : { gpus: input.gpus },
    });
    return { commandId: sent.commandId, result: resultJson(sent, 'health.resetGpus') };
  },
});
