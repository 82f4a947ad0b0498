import type { DriverTarget, Step, WorkflowPreload } from '@better-compute/provision';
import { bootKexec, daemonUpgrade, diagDcgm, nodeReboot } from './agent-steps';
import { diskWipe, resetGpus } from './attested-steps';
import { getPower, mediaEject, mediaInsert, setBootDevice, setPower } from './bmc-steps';
import { type DeployStepOptions, deployStep } from './deploy';
import { metalBmcTarget } from './driver-target';
import { ensureRamdisk } from './ensure-ramdisk';
import { inspectCollect } from './inspect-collect';
import { metalMachinePreload } from './machine-preload';
import { talosReady } from './talos-ready';

export { bootKexec, daemonUpgrade, diagDcgm, nodeReboot } from './agent-steps';
export { diskWipe, resetGpus } from './attested-steps';
export { BOOT_DEVICES, getPower, mediaEject, mediaInsert, POWER_ACTIONS, setBootDevice, setPower } from './bmc-steps';
export { type DeployStepOptions, deployStep } from './deploy';
export { metalBmcTarget } from './driver-target';
export { ensureRamdisk, RAMDISK_TOKEN_TTL_SECONDS } from './ensure-ramdisk';
export { INVENTORY_LABEL_KEYS, inspectCollect, MAX_MACHINE_ADDRESSES } from './inspect-collect';
export { METAL_MACHINE_PRELOAD_ID, metalMachinePreload } from './machine-preload';
export {
  bmcPayloadOf,
  driverBinding,
  type MachineBmc,
  type MachineSession,
  type MetalMachine,
  machineForStep,
  RELAYED_COMMAND_POLL_MS,
  siteRelayAgent,
} from './relay';
export { talosReady } from './talos-ready';

/**
 * Metal's steps, with `deploy.deploy` built from `options` (its image verifier).
 *
 * @example
 * ```ts
 * const steps = createMetalSteps({ imageVerifier: myVerifier });
 * ```
 */
export function createMetalSteps(options: DeployStepOptions = {}): readonly Step[] {
  return Object.freeze([
    setPower,
    getPower,
    setBootDevice,
    mediaInsert,
    mediaEject,
    ensureRamdisk,
    inspectCollect,
    deployStep(options),
    bootKexec,
    nodeReboot,
    daemonUpgrade,
    diagDcgm,
    diskWipe,
    resetGpus,
    talosReady,
  ] as Step[]);
}

/**
 * Every step metal ships, as `metal()` registers them (its `extensions`): the relaying BMC steps (`power.setPower`,
 * `power.getPower`, `management.setBootDevice`, `media.insert`, `media.eject`), `metal.ensureRamdisk`,
 * `inspect.collect`, `deploy.deploy`, the agent steps (`boot.kexec`, `node.reboot`, `daemon.upgrade`, `diag.dcgm`),
 * the verified `disk.wipe`, `health.resetGpus` and `metal.talosReady`.
 *
 * @example
 * ```ts
 * const provision = provisionModule({ steps: metalSteps, profiles: metalProfiles });
 * ```
 */
export const metalSteps: readonly Step[] = createMetalSteps();

/**
 * What `metal()` registers as its extensions: {@link metalSteps}, {@link metalBmcTarget}, which puts the machine's
 * `bmc` on the `driver.invoke` of a profile's driver operations, and {@link metalMachinePreload}, what the engine's
 * claim reads for metal's steps.
 *
 * @example
 * ```ts
 * const module = { id: 'metal', extensions: metalExtensions };
 * ```
 */
export const metalExtensions: readonly (Step | DriverTarget | WorkflowPreload)[] = Object.freeze([
  ...metalSteps,
  metalBmcTarget,
  metalMachinePreload,
]);
