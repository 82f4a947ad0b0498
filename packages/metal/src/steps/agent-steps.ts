import { field, manifest } from '@better-compute/core';
import { defineStep } from '@better-compute/provision';

/**
 * `boot.kexec`: the ramdisk kexecs into the image `deploy.deploy` wrote (`boot.kexec`, self-terminating). A profile
 * whose OS runs bcd sets `await: 'rejoin'` on it: the step then succeeds when the machine's agent is connected again
 * with a new boot id or role (the installed OS), and only its timeout fails it (REJOIN_TIMEOUT), so an `onFailure` BMC
 * reset fires only when the machine did not come back. The definition leaves `await` to the profile, since an OS
 * without bcd (Talos) never rejoins.
 *
 * @example
 * ```ts
 * const step = { use: 'boot.kexec', on: 'ramdisk', await: 'rejoin', timeout: '15m',
 *   onFailure: { use: 'power.setPower', on: 'site', with: { action: 'reset' } } };
 * ```
 */
export const bootKexec = defineStep({
  id: 'boot.kexec',
  runsOn: 'ramdisk',
  command: 'boot.kexec',
  timeout: '15m',
  retrySafe: false,
  input: manifest({}),
  description: 'The ramdisk kexecs into the written image; succeeds when the installed OS rejoins.',
});

/**
 * `node.reboot`: bcd reboots the machine (`node.reboot`, self-terminating, destructive); succeeds on the rejoin.
 *
 * @example
 * ```ts
 * const step = { use: 'node.reboot', on: 'node', await: 'rejoin' };
 * ```
 */
export const nodeReboot = defineStep({
  id: 'node.reboot',
  runsOn: 'node',
  command: 'node.reboot',
  await: 'rejoin',
  timeout: '15m',
  retrySafe: false,
  input: manifest({}),
  description: 'Reboots the machine from its daemon; succeeds when it rejoins with a new boot id.',
});

/**
 * `daemon.upgrade`: bcd replaces itself with the build at `url` (checked against `sha256`) and restarts
 * (self-terminating); succeeds when it rejoins.
 *
 * @example
 * ```ts
 * const step = { use: 'daemon.upgrade', on: 'node', await: 'rejoin', with: { url, sha256 } };
 * ```
 */
export const daemonUpgrade = defineStep({
  id: 'daemon.upgrade',
  runsOn: 'node',
  command: 'daemon.upgrade',
  await: 'rejoin',
  timeout: '10m',
  retrySafe: true,
  input: manifest({
    url: field.string({ minLength: 1, maxLength: 2048 }).describe('Where the new bcd build is.'),
    sha256: field.string({ pattern: '^[0-9a-f]{64}$' }).describe('Its SHA-256, lower-case hex.'),
  }),
  description: 'Upgrades bcd in place; succeeds when the new daemon rejoins.',
});

/**
 * `diag.dcgm`: NVIDIA DCGM diagnostics in the ramdisk at `level` (1 quick, 2 medium, 3 long, 4 extended). The agent
 * fails the command when a test fails; the result is its report.
 *
 * @example
 * ```ts
 * const step = { use: 'diag.dcgm', on: 'ramdisk', with: { level: 3 }, timeout: '2h' };
 * ```
 */
export const diagDcgm = defineStep({
  id: 'diag.dcgm',
  runsOn: 'ramdisk',
  command: 'diag.dcgm',
  timeout: '1h',
  retrySafe: true,
  input: manifest({ level: field.int({ min: 1, max: 4 }).default(1).describe('DCGM run level, 1 to 4.') }),
  description: 'Runs NVIDIA DCGM diagnostics at a level.',
});
