import type { ProfileStep } from '@better-compute/provision';

// Steps several shipped profiles share, written once so their names and options cannot drift apart.

/** PXE-boots the machine into the ramdisk (`metal.ensureRamdisk`). */
export const BOOT_RAMDISK: ProfileStep = { use: 'metal.ensureRamdisk', on: 'site', name: 'boot the ramdisk' };

/** Powers the machine off; in a cleanup, whatever happened before (a failure to power off does not fail it). */
export const POWER_OFF: ProfileStep = {
  use: 'power.setPower',
  on: 'site',
  name: 'power the machine off',
  with: { action: 'off' },
  onFailure: 'continue',
};

/** Makes the disk the persistent boot device, once an image is written. */
export const BOOT_FROM_DISK: ProfileStep = {
  use: 'management.setBootDevice',
  on: 'site',
  name: 'boot from disk from now on',
  with: { device: 'disk', persistent: true },
};
