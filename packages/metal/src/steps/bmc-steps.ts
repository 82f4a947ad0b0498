import { ComputeError, field, manifest } from '@better-compute/core';
import { defineStep } from '@better-compute/provision';
import { invokeDriver, machineForStep, relayed } from './relay';

/**
 * The power actions `power.setPower` takes: `on`, `off` (hard), `soft-off` (ACPI), `cycle` (off then on) and `reset`
 * (warm reset).
 *
 * @example
 * ```ts
 * POWER_ACTIONS.includes('cycle'); // true
 * ```
 */
export const POWER_ACTIONS = Object.freeze(['on', 'off', 'soft-off', 'cycle', 'reset'] as const);

/**
 * The boot devices `management.setBootDevice` takes.
 *
 * @example
 * ```ts
 * BOOT_DEVICES.includes('pxe'); // true
 * ```
 */
export const BOOT_DEVICES = Object.freeze(['pxe', 'disk', 'cd', 'bios'] as const);

/**
 * `power.setPower`: sets the machine's power through its BMC. A relaying step: it reads the machine's BMC from
 * `metal_machines` and sends one `driver.invoke` (`operation: 'power.setPower'`, `input: { action }`, the BMC and the
 * profile's `power` driver) to the site agent, key `:power`. Its result is `{ commandId, result }`, the agent's answer.
 *
 * @example
 * ```ts
 * const step = { use: 'power.setPower', on: 'site', with: { action: 'cycle' } };
 * ```
 */
export const setPower = defineStep({
  id: 'power.setPower',
  runsOn: 'control-plane',
  relays: ['site'],
  sends: ['driver.invoke'],
  timeout: '10m',
  retrySafe: true,
  input: manifest({ action: field.enum(POWER_ACTIONS).describe('What to do with the power.') }),
  description: "Sets the machine's power (on, off, soft-off, cycle, reset) through its BMC.",
  async run(input, ctx) {
    const machine = await machineForStep(ctx, 'power.setPower', { keys: ['power'] });
    const sent = await invokeDriver(ctx, machine, {
      operation: 'power.setPower',
      input: { action: input.action },
      key: 'power',
    });
    return relayed(sent, 'power.setPower');
  },
});

/**
 * `power.getPower`: reads the machine's power state through its BMC (what enrolling checks: the BMC answers and its
 * credential works). One `driver.invoke` (`operation: 'power.getPower'`), key `:power-state`. The agent answers
 * `{ state: 'on' | 'off' }`; anything else is DRIVER_ERROR.
 *
 * @example
 * ```ts
 * const step = { use: 'power.getPower', on: 'site' };
 * ```
 */
export const getPower = defineStep({
  id: 'power.getPower',
  runsOn: 'control-plane',
  relays: ['site'],
  sends: ['driver.invoke'],
  timeout: '5m',
  retrySafe: true,
  input: manifest({}),
  description: "Reads the machine's power state through its BMC.",
  async run(_input, ctx) {
    const machine = await machineForStep(ctx, 'power.getPower', { keys: ['power-state'] });
    const sent = await invokeDriver(ctx, machine, { operation: 'power.getPower', input: {}, key: 'power-state' });
    const answer = relayed(sent, 'power.getPower');
    const state = (answer.result as { state?: unknown } | null)?.state;
    if (state !== 'on' && state !== 'off') {
      throw new ComputeError('DRIVER_ERROR', "power.getPower: the BMC's answer has no power state (on or off)", {
        details: { commandId: sent.commandId, reason: 'result-malformed' },
      });
    }
    return { commandId: sent.commandId, state };
  },
});

/**
 * `management.setBootDevice`: the device the machine boots from next (`persistent: false`, the default, for the next
 * boot only). One `driver.invoke` (`operation: 'management.setBootDevice'`), key `:boot-device`.
 *
 * @example
 * ```ts
 * const step = { use: 'management.setBootDevice', on: 'site', with: { device: 'cd' } };
 * ```
 */
export const setBootDevice = defineStep({
  id: 'management.setBootDevice',
  runsOn: 'control-plane',
  relays: ['site'],
  sends: ['driver.invoke'],
  timeout: '10m',
  retrySafe: true,
  input: manifest({
    device: field.enum(BOOT_DEVICES).describe('The boot device.'),
    persistent: field.boolean().default(false).describe('Every boot from now on, not only the next one.'),
  }),
  description: 'Sets the boot device of the next boot (or every boot) through the BMC.',
  async run(input, ctx) {
    const machine = await machineForStep(ctx, 'management.setBootDevice', { keys: ['boot-device'] });
    const sent = await invokeDriver(ctx, machine, {
      operation: 'management.setBootDevice',
      input: { device: input.device, persistent: input.persistent },
      key: 'boot-device',
    });
    return relayed(sent, 'management.setBootDevice');
  },
});

async function urlFromStep(ctx: Parameters<typeof setPower.run>[1], action: string): Promise<string> {
  const { rows } = await ctx.sql.query<{ result: unknown }>(
    `SELECT result FROM workflow_steps WHERE workflow_id = $1 AND action = $2 AND state = 'succeeded'
     ORDER BY finished_at DESC NULLS LAST, position DESC LIMIT 1`,
    [ctx.workflowId, action],
  );
  const url = (rows[0]?.result as { url?: unknown } | null | undefined)?.url;
  if (rows.length === 0) {
    throw new ComputeError('INVALID_STATE', `media.insert: no step ${action} succeeded in this workflow before it`, {
      details: { path: ['with', 'fromStep'] },
    });
  }
  if (typeof url !== 'string' || url.length === 0 || url.length > 2048) {
    throw new ComputeError('INVALID_INPUT', `media.insert: step ${action} returned no url`, {
      details: { path: ['with', 'fromStep'] },
    });
  }
  return url;
}

function checkMediaUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ComputeError('INVALID_INPUT', 'media.insert: url must be an absolute http(s) URL', {
      details: { path: ['with', 'url'] },
    });
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new ComputeError('INVALID_INPUT', 'media.insert: url must be http or https', {
      details: { path: ['with', 'url'] },
    });
  }
  if (parsed.username !== '' || parsed.password !== '') {
    throw new ComputeError('INVALID_INPUT', 'media.insert: url must not carry credentials', {
      details: { path: ['with', 'url'] },
    });
  }
  return url;
}

/**
 * `media.insert`: inserts a virtual-media image (an ISO) into the machine's BMC. The image is `url`, or the `url`
 * the latest succeeded step with action `fromStep` returned in the same workflow (read from `workflow_steps` by
 * `workflow_id` and `action`, never from memory); exactly one of the two. One `driver.invoke`
 * (`operation: 'virtual-media.insert'`, `input: { url, device }`), key `:media`.
 *
 * @example
 * ```ts
 * const step = { use: 'media.insert', on: 'site', with: { fromStep: 'autoinstall.renderIso' } };
 * ```
 */
export const mediaInsert = defineStep({
  id: 'media.insert',
  runsOn: 'control-plane',
  relays: ['site'],
  sends: ['driver.invoke'],
  timeout: '10m',
  retrySafe: true,
  input: manifest({
    fromStep: field.string({ minLength: 3, maxLength: 128 }).optional().describe('The action whose result url to use.'),
    url: field.string({ minLength: 1, maxLength: 2048 }).optional().describe('The image, when no step made it.'),
    device: field.enum(['cd', 'usb']).default('cd'),
  }),
  description: 'Inserts a virtual-media image (from an earlier step, or a URL) through the BMC.',
  async run(input, ctx) {
    if ((input.fromStep === undefined) === (input.url === undefined)) {
      throw new ComputeError('INVALID_INPUT', 'media.insert takes exactly one of fromStep and url', {
        details: { path: ['with', 'fromStep'] },
      });
    }
    const url = checkMediaUrl(input.url ?? (await urlFromStep(ctx, input.fromStep as string)));
    const machine = await machineForStep(ctx, 'media.insert', { keys: ['media'] });
    const sent = await invokeDriver(ctx, machine, {
      operation: 'virtual-media.insert',
      input: { url, device: input.device },
      key: 'media',
    });
    return { ...relayed(sent, 'media.insert'), url };
  },
});

/**
 * `media.eject`: ejects the virtual media. One `driver.invoke` (`operation: 'virtual-media.eject'`), key `:media`.
 *
 * @example
 * ```ts
 * const step = { use: 'media.eject', on: 'site' };
 * ```
 */
export const mediaEject = defineStep({
  id: 'media.eject',
  runsOn: 'control-plane',
  relays: ['site'],
  sends: ['driver.invoke'],
  timeout: '10m',
  retrySafe: true,
  input: manifest({ device: field.enum(['cd', 'usb']).default('cd') }),
  description: 'Ejects the virtual media through the BMC.',
  async run(input, ctx) {
    const machine = await machineForStep(ctx, 'media.eject', { keys: ['media'] });
    const sent = await invokeDriver(ctx, machine, {
      operation: 'virtual-media.eject',
      input: { device: input.device },
      key: 'media',
    });
    return relayed(sent, 'media.eject');
  },
});
