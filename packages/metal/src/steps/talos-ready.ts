import { ComputeError, field, manifest } from '@better-compute/core';
import { defineStep } from '@better-compute/provision';
import { httpViaSite } from '../http-via-site/http-via-site';
import { machineForStep } from './relay';

/**
 * `metal.talosReady`: waits until Talos answers on the machine (`GET https://<address>:<port>/machine/version` through
 * the site agent, with `httpViaSite`'s SSRF checks and `poll: true`), at the machine's first known address. Named
 * `metal.` rather than the walkthrough's `wait.talosReady`, which a plugin defines itself (step ids share one
 * namespace). Returns `{ status, address }`.
 *
 * @example
 * ```ts
 * const step = { use: 'metal.talosReady', on: 'site', with: { port: 50000 }, timeout: '20m' };
 * ```
 */
export const talosReady = defineStep({
  id: 'metal.talosReady',
  runsOn: 'control-plane',
  relays: ['site'],
  sends: ['site.httpProxy'],
  timeout: '20m',
  retrySafe: true,
  input: manifest({ port: field.int({ min: 1, max: 65535 }).default(50000).describe('The Talos API port.') }),
  description: 'Waits until the Talos API answers on the machine, through the site agent.',
  async run(input, ctx) {
    const machine = await machineForStep(ctx, 'metal.talosReady');
    const address = machine.addresses[0];
    if (!address) {
      throw new ComputeError('INVALID_STATE', 'metal.talosReady: the control plane knows no address of this machine', {
        details: { path: ['addresses'], reason: 'no-address' },
      });
    }
    const host = address.includes(':') ? `[${address}]` : address;
    const response = await httpViaSite(ctx, { url: `https://${host}:${input.port}/machine/version`, poll: true });
    return { status: response.status, address };
  },
});
