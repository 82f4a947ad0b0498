// compute.ts of steps-and-profiles.md ("Shipping steps and profiles"), as written there.
import { definePlugin } from 'better-compute/core';
import { metal } from 'better-compute/metal';
import { provisionModule } from 'better-compute/provision';
import { talos, talosReady } from './acme-talos';
import { ubuntuAutoinstall } from './profiles/ubuntu-autoinstall';
import { renderAutoinstallIso } from './steps/render-iso';

// 1. Directly: provision registers them as its own.
export const provision = provisionModule({ steps: [talosReady], profiles: [talos] });

// 2. As a plugin: the engine borrows its steps and profiles, the plugin registers them itself.
export const acmeAutoinstall = definePlugin({
  id: 'acme-autoinstall',
  extensions: [renderAutoinstallIso],
  profiles: [ubuntuAutoinstall],
});
export const bareMetal = metal();
export const provisionWithPlugin = provisionModule({ modules: [bareMetal, acmeAutoinstall] });
