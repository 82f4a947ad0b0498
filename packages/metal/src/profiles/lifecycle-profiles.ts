import { defineProfile } from '@better-compute/provision';
import { BOOT_RAMDISK, POWER_OFF } from './common-steps';

/**
 * `metal.enroll`: the BMC answers with its credential and the machine's power state is read (`power.getPower`
 * through the site agent). Nothing is powered or booted.
 *
 * @example
 * ```ts
 * metalEnroll.steps?.map((s) => s.use); // ['power.getPower']
 * ```
 */
export const metalEnroll = defineProfile({
  id: 'metal.enroll',
  version: 1,
  target: 'metal',
  description: 'Checks that the BMC answers with its credential and reads the power state.',
  steps: [{ use: 'power.getPower', on: 'site', name: 'BMC reachable: read the power state', retries: 2 }],
});

/**
 * `metal.inspect`: PXE-boots the ramdisk (`metal.ensureRamdisk`), collects the hardware inventory into facts and
 * labels (`inspect.collect`), and powers the machine off in its cleanup, whatever happened.
 *
 * @example
 * ```ts
 * metalInspect.steps?.map((s) => s.use); // ['metal.ensureRamdisk', 'inspect.collect']
 * ```
 */
export const metalInspect = defineProfile({
  id: 'metal.inspect',
  version: 1,
  target: 'metal',
  description: 'Boots the ramdisk and records the hardware inventory as facts and labels.',
  steps: [BOOT_RAMDISK, { use: 'inspect.collect', on: 'ramdisk', name: 'collect the hardware inventory' }],
  cleanup: [POWER_OFF],
});

/**
 * `metal.commission`: inspects again, reads firmware and BIOS facts through Redfish (`firmware.getInventory`,
 * `bios.getSettings`, skipped over on a BMC that cannot), runs DCGM diagnostics at level 2, a burn-in (DCGM level 4,
 * up to 12 hours), then as acceptance inspects once more, so a GPU that fell off the bus under load changes the
 * labels before the machine is offered. Powers off in its cleanup.
 *
 * @example
 * ```ts
 * metalCommission.acceptance?.[0]?.use; // 'inspect.collect'
 * ```
 */
export const metalCommission = defineProfile({
  id: 'metal.commission',
  version: 1,
  target: 'metal',
  description: 'Inspects, reads firmware and BIOS, runs GPU diagnostics and a burn-in, and checks the hardware after.',
  drivers: { firmware: { name: 'redfish' }, bios: { name: 'redfish' } },
  steps: [
    BOOT_RAMDISK,
    { use: 'inspect.collect', on: 'ramdisk', name: 'collect the hardware inventory' },
    { use: 'firmware.getInventory', on: 'site', name: 'read the firmware versions', onFailure: 'continue' },
    { use: 'bios.getSettings', on: 'site', name: 'read the BIOS settings', onFailure: 'continue' },
    {
      use: 'diag.dcgm',
      on: 'ramdisk',
      name: 'GPU diagnostics (DCGM level 2)',
      with: { level: 2 },
      timeout: '1h',
      when: 'gpu.count && gpu.count!=0',
    },
    {
      use: 'diag.dcgm',
      on: 'ramdisk',
      name: 'burn-in (DCGM level 4)',
      with: { level: 4 },
      timeout: '12h',
      when: 'gpu.count && gpu.count!=0',
    },
  ],
  acceptance: [{ use: 'inspect.collect', on: 'ramdisk', name: 'acceptance: the hardware is all still there' }],
  cleanup: [POWER_OFF],
});

/**
 * `metal.release`: boots the ramdisk, wipes the disks (`disk.wipe`, accepted only with the machine's signed result),
 * and powers the machine off.
 *
 * @example
 * ```ts
 * metalRelease.steps?.map((s) => s.use); // ['metal.ensureRamdisk', 'disk.wipe', 'power.setPower']
 * ```
 */
export const metalRelease = defineProfile({
  id: 'metal.release',
  version: 1,
  target: 'metal',
  description: "Boots the ramdisk, wipes the disks (verified by the machine's signature) and powers off.",
  steps: [
    BOOT_RAMDISK,
    { use: 'disk.wipe', on: 'ramdisk', name: 'wipe the disks', with: { mode: 'quick' } },
    { use: 'power.setPower', on: 'site', name: 'power the machine off', with: { action: 'off' } },
  ],
});

/**
 * `metal.retire`: powers the machine off for good (its disks were wiped by the release before it).
 *
 * @example
 * ```ts
 * metalRetire.steps?.[0]?.with; // { action: 'off' }
 * ```
 */
export const metalRetire = defineProfile({
  id: 'metal.retire',
  version: 1,
  target: 'metal',
  description: 'Powers the machine off for good.',
  steps: [{ use: 'power.setPower', on: 'site', name: 'power the machine off', with: { action: 'off' } }],
});

/**
 * `metal.adopt`: takes over a machine already running its OS (mode `adopt`: no image, user data or steps); its
 * acceptance only checks that the BMC answers.
 *
 * @example
 * ```ts
 * metalAdopt.mode; // 'adopt'
 * ```
 */
export const metalAdopt = defineProfile({
  id: 'metal.adopt',
  version: 1,
  target: 'metal',
  mode: 'adopt',
  role: 'host',
  description: 'Takes over a running machine without touching its disks; checks that its BMC answers.',
  acceptance: [{ use: 'power.getPower', on: 'site', name: 'BMC reachable: read the power state' }],
});
