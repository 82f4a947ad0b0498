import { defineProfile } from '@better-compute/provision';
import { BOOT_FROM_DISK, BOOT_RAMDISK } from './common-steps';

/**
 * `metal.deploy-image`: deploys a catalog image through the ramdisk: boot the ramdisk, render the cloud-init user
 * data (with its single-use join token), write the image and the user data (`deploy.deploy`; the image is the
 * deploy's, or a profile version's own), kexec into it and wait for the installed OS to rejoin (`boot.kexec`,
 * `await: 'rejoin'`; a BMC power reset if it does not come back in 15 minutes), then for its daemon to join as a
 * node. The machine boots from its disk from then on.
 *
 * @example
 * ```ts
 * await compute.api.metal.deploy(credential, { tenantId: 'root', nodeId, profileId: 'metal.deploy-image', image: 'ubuntu/noble@24.04.1' });
 * ```
 */
export const metalDeployImage = defineProfile({
  id: 'metal.deploy-image',
  version: 1,
  target: 'metal',
  role: 'host',
  description: 'Writes a catalog image and cloud-init user data from the ramdisk, kexecs into it and waits for it.',
  userData: { kind: 'cloud-init' },
  steps: [
    BOOT_RAMDISK,
    { use: 'userdata.render', name: 'render the user data' },
    { use: 'deploy.deploy', on: 'ramdisk', name: 'write the image and the user data' },
    BOOT_FROM_DISK,
    {
      use: 'boot.kexec',
      on: 'ramdisk',
      name: 'kexec into the installed OS',
      await: 'rejoin',
      timeout: '15m',
      onFailure: { use: 'power.setPower', on: 'site', with: { action: 'reset' } },
    },
    { use: 'wait.agentJoined', name: "wait for the installed OS's daemon", with: { role: 'node' } },
  ],
});

/**
 * `metal.deploy-talos`: deploys a Talos image through the ramdisk with Talos machine config as user data (kind
 * `talos`): boot the ramdisk, render the config, write both, boot from disk (a BMC power cycle, since Talos runs no
 * agent to kexec into), and wait until the Talos API answers on the machine (`metal.talosReady` through
 * `httpViaSite`).
 *
 * @example
 * ```ts
 * await compute.api.metal.deploy(credential, { tenantId: 'root', nodeId, profileId: 'metal.deploy-talos', image: 'talos@v1.9.2' });
 * ```
 */
export const metalDeployTalos = defineProfile({
  id: 'metal.deploy-talos',
  version: 1,
  target: 'metal',
  role: 'host',
  description: 'Writes a Talos image and its machine config from the ramdisk, boots it and waits for the Talos API.',
  userData: { kind: 'talos' },
  steps: [
    BOOT_RAMDISK,
    { use: 'userdata.render', name: 'render the Talos machine config' },
    { use: 'deploy.deploy', on: 'ramdisk', name: 'write the image and the machine config' },
    BOOT_FROM_DISK,
    { use: 'power.setPower', on: 'site', name: 'boot Talos', with: { action: 'cycle' } },
    { use: 'metal.talosReady', on: 'site', name: 'wait for the Talos API', timeout: '20m' },
  ],
});
