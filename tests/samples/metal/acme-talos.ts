// acme-talos.ts of steps-and-profiles.md ("Relaying under the quorum"), as written there, on metal's own httpViaSite.
import { field, manifest } from 'better-compute/core';
import { httpViaSite } from 'better-compute/metal';
import { defineProfile, defineStep } from 'better-compute/provision';

// What the page leaves out: the machine's address (one the control plane knows for it, or httpViaSite refuses it).
export const address = '10.0.0.7';

export const talosReady = defineStep({
  id: 'wait.talosReady',
  runsOn: 'control-plane',
  relays: ['site'],
  sends: ['site.httpProxy'], // httpViaSite enqueues site.httpProxy, a destructive kind
  timeout: '20m',
  retrySafe: true,
  input: manifest({ port: field.int({ min: 1, max: 65535 }).default(50000) }),
  async run(input, ctx) {
    const response = await httpViaSite(ctx, { url: `https://${address}:${input.port}/machine/version`, poll: true });
    // ...
    return { status: response.status };
  },
});

// The `talos` profile compute.ts registers (the page names it without writing it): wait until Talos answers.
export const talos = defineProfile({
  id: 'acme.talos',
  version: 1,
  target: 'metal',
  steps: [{ use: 'wait.talosReady', on: 'site', timeout: '20m' }],
});
