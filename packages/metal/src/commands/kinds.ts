import { type CommandKindDefinition, field, manifest } from '@better-compute/core';

// The command kinds metal registers: what its steps send and what a site agent, a ramdisk or bcd implements. The
// payload manifests are the contract with the agents (and with createMetalSim, which answers them).

/** The BMC a site agent reaches for a machine: its address, driver and the reference to its credential. */
export const bmcPayload = field.object({
  address: field.string({ minLength: 1, maxLength: 255 }),
  driver: field.string({ minLength: 1, maxLength: 64 }),
  credentialRef: field.secretRef().optional(),
});

/**
 * The kinds metal registers, by name.
 *
 * @example
 * ```ts
 * METAL_COMMAND_KINDS.map((kind) => kind.name); // ['driver.invoke', 'site.httpProxy', …]
 * ```
 */
export const METAL_COMMAND_KINDS: readonly CommandKindDefinition[] = Object.freeze([
  {
    // One operation of a concern's driver on a machine's BMC, sent to the site agent (targetNodeId: the machine).
    name: 'driver.invoke',
    description: 'A driver operation (<concern>.<operation>) on the target machine, run by the site agent.',
    payload: manifest({
      operation: field.string({ minLength: 3, maxLength: 128 }),
      driver: field.json(),
      input: field.json(),
      bmc: bmcPayload.optional(),
    }),
    destructive: true,
  },
  {
    // One HTTP request from the site agent to the machine's own address (httpViaSite).
    name: 'site.httpProxy',
    description: "One HTTP request from the site agent to an address of the target machine's.",
    payload: manifest({
      method: field.enum(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']).default('GET'),
      url: field.string({ minLength: 1, maxLength: 2048 }),
      headers: field.json().optional(),
      body: field.string({ maxLength: 1_048_576 }).optional(),
      timeoutMs: field.int({ min: 1, max: 600_000 }).default(30_000),
    }),
    destructive: true,
  },
  {
    // A PXE boot entry for one MAC: the site agent (boot-lease holder) boots it into the ramdisk with the token.
    name: 'site.bootEntry',
    description: 'A one-time PXE boot entry for a MAC: into the ramdisk (with a join token reference) or local disk.',
    payload: manifest({
      mac: field.string({ pattern: '^[0-9a-f]{2}(:[0-9a-f]{2}){5}$' }),
      mode: field.enum(['ramdisk', 'local']),
      tokenRef: field.secretRef().optional(),
    }),
  },
  {
    name: 'inspect.collect',
    description: "The ramdisk's hardware inventory (CPU, memory, GPUs, NVSwitches, InfiniBand, disks, MACs).",
    payload: manifest({}),
  },
  {
    name: 'deploy.image',
    description: 'The ramdisk writes an image to the root disk and the user data beside it.',
    payload: manifest({
      image: field.object({
        url: field.string({ minLength: 1, maxLength: 2048 }),
        digest: field.string({ pattern: '^sha256:[0-9a-f]{64}$' }),
      }),
      userDataRef: field.secretRef().optional(),
      userDataKind: field.string({ maxLength: 64 }).optional(),
    }),
    destructive: true,
  },
  {
    name: 'boot.kexec',
    description: 'The ramdisk kexecs into the written image; its agent comes back as the installed OS.',
    payload: manifest({}),
    selfTerminating: true,
  },
  {
    name: 'node.reboot',
    description: 'bcd reboots the machine; it comes back with a new boot id.',
    payload: manifest({}),
    destructive: true,
    selfTerminating: true,
  },
  {
    name: 'daemon.upgrade',
    description: 'bcd replaces itself with the given build and restarts.',
    payload: manifest({
      url: field.string({ minLength: 1, maxLength: 2048 }),
      sha256: field.string({ pattern: '^[0-9a-f]{64}$' }),
    }),
    selfTerminating: true,
  },
  {
    name: 'disk.wipe',
    description: "Wipes the machine's disks; the result is signed with the machine's own key.",
    payload: manifest({ mode: field.enum(['quick', 'secure']).default('quick') }),
    destructive: true,
  },
  {
    name: 'diag.dcgm',
    description: 'NVIDIA DCGM diagnostics at a level (1 quick to 4 extended).',
    payload: manifest({ level: field.int({ min: 1, max: 4 }).default(1) }),
  },
  {
    name: 'health.resetGpus',
    description: "Resets the machine's GPUs (all, or the listed UUIDs).",
    payload: manifest({ gpus: field.array(field.string({ maxLength: 128 }), { maxItems: 64 }).optional() }),
    destructive: true,
  },
]);
