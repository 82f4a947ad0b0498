import { randomUUID } from 'node:crypto';
import type { Command, Json, SqlDatabase } from '@better-compute/core';
import { generateSigningKeyPair, type Pki, type SigningKeyPair, signToBase64Url } from '@better-compute/pki';
import type { SimAgent, SimOutcome } from './sim-agent';

/** What a simulated machine is built with; everything has a default. */
export interface SimMachineSpec {
  /** The BMC's address (default `10.1.<n>.<m>`) and driver (default `redfish`). */
  bmcAddress?: string;
  bmcDriver?: string;
  /** The BMC's login; default `admin` and a random password. `null`: a BMC without credentials. */
  bmcCredentials?: { username: string; password: string } | null;
  /** Its NICs' MACs (default three, derived from the machine's number); the first is the one PXE boots and enroll names. */
  macs?: string[];
  /** The IP addresses its ramdisk and OS have (default `10.0.<n>.<m>`). */
  addresses?: string[];
  cpu?: { model: string; sockets: number; cores: number };
  memoryMiB?: number;
  /** Default eight `H100` with 80 GiB, MIG capable; `[]` for none. */
  gpus?: { model: string; uuid?: string; memoryMiB?: number; migCapable?: boolean }[];
  /** Default 4 (an HGX board); 0 for none. */
  nvswitches?: number;
  /** InfiniBand ports; default 4 at 400 Gb/s. */
  infinibandPorts?: number;
  /** Default two 3.84 TB NVMe drives. */
  disks?: { device: string; sizeBytes: number; rotational?: boolean }[];
  /** Power at the start; default `off`. */
  power?: 'on' | 'off';
}

/** What a machine boots an installed OS from: an image the ramdisk wrote, or virtual media (an installer ISO). */
export type InstallSource =
  | {
      from: 'image';
      image: { url: string; digest: string };
      /** The user data the ramdisk wrote beside it (fetched through its reference, as the ramdisk does). */
      userData?: string;
      userDataKind?: string;
      machine: SimMachine;
    }
  | { from: 'media'; url: string; machine: SimMachine };

/**
 * The OS a source installs: `bcd` (its daemon joins with `joinToken`, the first boot's credential, and comes back as
 * role `node` on every boot after), `talos` (no agent; answers the Talos API over HTTPS on port 50000), or `none`
 * (boots, but nothing joins or answers).
 */
export type InstallPlan = { os: 'bcd'; joinToken?: string } | { os: 'talos' } | { os: 'none' };

/** Turns an install source into what boots; `undefined` defers to the default ({@link defaultInstall}). */
export type InstallHook = (source: InstallSource) => InstallPlan | undefined | Promise<InstallPlan | undefined>;

const JOIN_TOKEN = /tok_[0-9A-Za-z]{26}\.[A-Za-z0-9_-]{43}/;

/**
 * The first join token (`tok_….<secret>`) in a document, the way bcd finds the token its user data wrote.
 *
 * @example
 * ```ts
 * joinTokenIn(userData); // 'tok_01k….Xy…'
 * ```
 */
export function joinTokenIn(document: string | undefined): string | undefined {
  return document === undefined ? undefined : JOIN_TOKEN.exec(document)?.[0];
}

/**
 * What an install source boots when the test gives no hook of its own: an image with Talos user data (`talos`) boots
 * Talos; any other image boots an OS whose bcd joins with the token in its user data (none: an OS that never joins);
 * virtual media installs nothing.
 *
 * @example
 * ```ts
 * createMetalSim({ install: (source) => (source.from === 'media' ? { os: 'bcd', joinToken } : undefined) });
 * ```
 */
export function defaultInstall(source: InstallSource): InstallPlan {
  if (source.from === 'media') return { os: 'none' };
  if (source.userDataKind === 'talos') return { os: 'talos' };
  const joinToken = joinTokenIn(source.userData);
  return joinToken ? { os: 'bcd', joinToken } : { os: 'none' };
}

/** A command kind or driver operation a fault applies to, or a predicate over the command. */
export type FaultMatch = string | ((command: Command) => boolean);

/** The switches of one machine's faults. */
export interface MachineFaults {
  /** The BMC does not answer: every `driver.invoke` for it fails. */
  bmcUnreachable: boolean;
  /** After a power-on, reboot or kexec nothing comes back: no ramdisk, no OS joins. */
  neverComesBack: boolean;
  /** The signed results (`disk.wipe`) are altered after signing. */
  tamperSignature: boolean;
}

/** What is written on the machine's disk. */
export interface SimDisk {
  image?: { url: string; digest: string };
  userDataKind?: string;
  /** Whether user data was written (never the document itself). */
  userData: boolean;
  os?: InstallPlan;
  /** Whether the installed OS already spent its first-boot token. */
  joined: boolean;
}

/** Where a machine's BMC stands. */
export interface SimBmc {
  address: string;
  driver: string;
  power: 'on' | 'off';
  /** The persistent boot device. */
  bootDevice: string;
  /** The device of the next boot only, until it boots. */
  oneTimeBoot?: string;
  /** Inserted virtual media by device (`cd`, `usb`) → URL. */
  media: Record<string, string>;
}

/** What the machine runs now. */
export type SimRunning = 'off' | 'ramdisk' | 'os' | 'talos' | 'none';

/** One simulated machine: its BMC, NICs, disks and agents. */
export interface SimMachine {
  /** A number the simulation gives it (1, 2, …). */
  readonly index: number;
  readonly spec: Required<Omit<SimMachineSpec, 'bmcCredentials' | 'power'>> & {
    bmcCredentials: { username: string; password: string } | null;
  };
  /** The node it was enrolled as (set by `sim.enroll`); undefined before. */
  nodeId: string | undefined;
  readonly siteId: string;
  readonly bmc: Readonly<SimBmc>;
  readonly disk: Readonly<SimDisk>;
  readonly running: SimRunning;
  /** How many times it booted (any boot: ramdisk, OS, nothing). */
  readonly boots: number;
  /** The serial of the certificate its current key holds (the ramdisk's, then the installed OS's). */
  readonly certificateSerial: string | undefined;
  /** The machine's own agent (ramdisk, then bcd): its role and boot id as of now. */
  readonly agent: SimAgent;
  readonly faults: MachineFaults;
  /** Fails the next `times` commands (kinds, or `driver.invoke` operations) the fault matches, with `reason`. */
  fail(match: FaultMatch, reason?: string, times?: number): void;
  /** Leaves the next `times` matching commands hanging: started, never finished. */
  hang(match: FaultMatch, times?: number): void;
  /** Answers `site.httpProxy` requests to this machine (before the OS's own answers); undefined: no answer. */
  http(handler: SimHttpHandler | undefined): void;
}

/** A request the site agent makes to a machine, and its answer (`undefined`: no answer, connection refused). */
export type SimHttpHandler = (request: {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body?: string;
}) => { status: number; headers?: Record<string, string>; body?: string } | undefined;

/** A PXE boot entry a site agent holds for a MAC. */
export interface BootEntry {
  mac: string;
  token: string;
}

/**
 * What a join gives the machine: its certificate's serial and node, and the key to sign results with. Without a key,
 * the machine's agent signs the result bytes itself (an agent over HTTP holds the key it generated at its join).
 */
export interface MachineIdentity {
  serial: string;
  nodeId?: string;
  key?: SigningKeyPair;
}

/** What a machine needs from the rest of the simulation. */
export interface MachineEnvironment {
  /**
   * Joins with a token and the machine's claims (the ramdisk with its boot entry's token, the installed OS with the
   * token its user data carries); `undefined` when refused. Default: pki's `joinAgent` in-process on `sql`.
   */
  join?(token: string, claims: Record<string, string>): Promise<MachineIdentity | undefined>;
  /** The pki and database the default join uses (needed without `join`). */
  security?: Pki;
  sql?: SqlDatabase;
  /** Takes the site's boot entry for one of the MACs (one-time), if the site holds one. */
  takeBootEntry(macs: readonly string[]): BootEntry | undefined;
  install: InstallHook | undefined;
  /** A secret the agent's live command `commandId` carries, fetched with that command's id. */
  fetchSecret(agentNodeId: string, ref: string, commandId: string): Promise<string>;
  log(message: string): void;
  /**
   * Lets a boot's time pass (a moment of the fake clock, so what joins joins after what started it; or real time, for
   * agents over the network).
   */
  elapse(ms: number): void | Promise<void>;
}

/** How long a boot takes on the fake clock. */
export const BOOT_MS = 1_000;

interface Fault {
  match: FaultMatch;
  left: number;
  reason?: string;
  hang: boolean;
}

/** Internal: the machine object plus what only the simulation calls. */
export interface MachineInternals extends SimMachine {
  /** Takes the matching fault of a command (or a `driver.invoke` operation), counting it down. */
  takeFault(command: Command, operation?: string): Fault | undefined;
  /** The BMC's side of one driver operation. */
  driver(operation: string, input: Record<string, Json>): Promise<SimOutcome>;
  /** The machine's agent's side of one command (ramdisk or bcd). */
  agentCommand(command: Command): Promise<SimOutcome>;
  /** A request of the site agent's proxy to this machine. */
  httpRequest(request: Parameters<SimHttpHandler>[0]): ReturnType<SimHttpHandler>;
  attachAgent(agent: SimAgent): void;
}

function macFor(index: number, nic: number): string {
  const hex = (index * 4 + nic).toString(16).padStart(6, '0');
  return `0c:42:a1:${hex.slice(0, 2)}:${hex.slice(2, 4)}:${hex.slice(4, 6)}`;
}

/** Builds the spec of machine number `index` from its defaults. */
export function machineSpec(index: number, spec: SimMachineSpec): SimMachine['spec'] {
  const [high, low] = [Math.floor(index / 250), (index % 250) + 1];
  return {
    bmcAddress: spec.bmcAddress ?? `10.1.${high}.${low}`,
    bmcDriver: spec.bmcDriver ?? 'redfish',
    bmcCredentials:
      spec.bmcCredentials === undefined ? { username: 'admin', password: `pw-${randomUUID()}` } : spec.bmcCredentials,
    macs: (spec.macs ?? [0, 1, 2].map((nic) => macFor(index, nic))).map((mac) => mac.toLowerCase()),
    addresses: spec.addresses ?? [`10.0.${high}.${low}`],
    cpu: spec.cpu ?? { model: 'AMD EPYC 9654', sockets: 2, cores: 192 },
    memoryMiB: spec.memoryMiB ?? 2_097_152,
    gpus: (
      spec.gpus ??
      Array.from({ length: 8 }, (): NonNullable<SimMachineSpec['gpus']>[number] => ({
        model: 'H100',
        memoryMiB: 81_559,
        migCapable: true,
      }))
    ).map((gpu, i) => ({
      model: gpu.model,
      uuid: gpu.uuid ?? `GPU-${index.toString(16).padStart(8, '0')}-${i}`,
      ...(gpu.memoryMiB === undefined ? {} : { memoryMiB: gpu.memoryMiB }),
      migCapable: gpu.migCapable ?? false,
    })),
    nvswitches: spec.nvswitches ?? 4,
    infinibandPorts: spec.infinibandPorts ?? 4,
    disks: spec.disks ?? [
      { device: '/dev/nvme0n1', sizeBytes: 3_840_000_000_000 },
      { device: '/dev/nvme1n1', sizeBytes: 3_840_000_000_000 },
    ],
  };
}

const ok = (result?: Json | Uint8Array, after?: () => Promise<void>): SimOutcome => ({
  outcome: 'succeed',
  ...(result === undefined ? {} : { result }),
  ...(after ? { after } : {}),
});
const failed = (reason: string): SimOutcome => ({ outcome: 'fail', reason });

/** Makes machine number `index` of a site. */
export function createMachine(
  index: number,
  siteId: string,
  specInput: SimMachineSpec,
  env: MachineEnvironment,
): MachineInternals {
  const spec = machineSpec(index, specInput);
  const bmc: SimBmc = {
    address: spec.bmcAddress,
    driver: spec.bmcDriver,
    power: specInput.power ?? 'off',
    bootDevice: 'disk',
    media: {},
  };
  let disk: SimDisk = { userData: false, joined: false };
  let running: SimRunning = 'off';
  let boots = 0;
  let identity: MachineIdentity | undefined;
  let agent: SimAgent | undefined;
  let httpHandler: SimHttpHandler | undefined;
  const faults: MachineFaults = { bmcUnreachable: false, neverComesBack: false, tamperSignature: false };
  const pending: Fault[] = [];

  const theAgent = (): SimAgent => {
    if (!agent) throw new Error('metal sim: the machine has no agent yet (enroll it first)');
    return agent;
  };

  async function joinInProcess(token: string, claims: Record<string, string>): Promise<MachineIdentity | undefined> {
    const { security, sql } = env;
    if (!security || !sql) throw new Error('metal sim: a machine environment needs join, or security and sql');
    const key = generateSigningKeyPair('ed25519');
    try {
      const joined = await sql.transaction((tx) =>
        security.joinAgent(tx, { token, publicKey: key.publicKeyPem, claims }),
      );
      return { key, serial: joined.serial, nodeId: joined.nodeId };
    } catch (error) {
      env.log(`machine ${index}: join refused (${(error as Error).message})`);
      return undefined;
    }
  }

  async function join(token: string, claims: Record<string, string>): Promise<boolean> {
    const joined = await (env.join ? env.join(token, claims) : joinInProcess(token, claims));
    if (!joined) return false;
    identity = joined;
    return true;
  }

  /** The installed OS boots from the disk (a power-on, a reset, a kexec, a reboot, the installer's reboot). */
  async function bootDisk(): Promise<void> {
    const os = disk.os;
    if (!os || os.os === 'none') {
      running = os ? 'os' : 'none';
      return;
    }
    if (os.os === 'talos') {
      running = 'talos';
      return;
    }
    running = 'os';
    if (!disk.joined) {
      // First boot: bcd joins with the token its user data wrote (and removes it).
      if (!os.joinToken || !(await join(os.joinToken, { mac: spec.macs[0] as string }))) return;
      disk = { ...disk, joined: true };
    }
    if (identity) await theAgent().connect('node');
  }

  /** Power comes on (or the machine resets): the firmware boots the one-time device, else the persistent one. */
  async function boot(): Promise<void> {
    await theAgent().disconnect();
    await env.elapse(BOOT_MS);
    boots += 1;
    const device = bmc.oneTimeBoot ?? bmc.bootDevice;
    bmc.oneTimeBoot = undefined;
    if (faults.neverComesBack) {
      running = 'none';
      return;
    }
    if (device === 'pxe') {
      const entry = env.takeBootEntry(spec.macs);
      if (entry) {
        running = 'ramdisk';
        // The ramdisk joins with its boot entry's token, claiming the MAC it booted from.
        if (await join(entry.token, { mac: entry.mac })) await theAgent().connect('ramdisk');
        else running = 'none';
        return;
      }
      return bootDisk(); // no entry: PXE falls through to the local disk
    }
    if (device === 'cd' || device === 'usb') {
      const url = bmc.media[device];
      if (!url) return bootDisk();
      // The installer on the media writes the OS, then reboots into it.
      const plan =
        (await env.install?.({ from: 'media', url, machine })) ?? defaultInstall({ from: 'media', url, machine });
      disk = { userData: false, joined: false, os: plan };
      return bootDisk();
    }
    if (device === 'bios') {
      running = 'none';
      return;
    }
    return bootDisk();
  }

  async function powerOff(): Promise<void> {
    bmc.power = 'off';
    running = 'off';
    await theAgent().disconnect();
  }

  /** The running system restarts without the firmware (kexec, a reboot from the OS, a daemon restart). */
  async function restart(into: 'disk' | 'same'): Promise<void> {
    await theAgent().disconnect();
    await env.elapse(BOOT_MS);
    boots += 1;
    if (faults.neverComesBack) {
      running = 'none';
      return;
    }
    if (into === 'disk') return bootDisk();
    if (identity) await theAgent().connect('node');
  }

  function signed(body: Json): SimOutcome {
    if (!identity) return failed('the machine holds no key to sign with');
    const bytes = new TextEncoder().encode(JSON.stringify(body));
    // The agent signs with the key it joined with (over HTTP); a tampered signature is the in-process model's only.
    if (!identity.key) return { outcome: 'succeed', result: bytes, sign: true };
    const signature = signToBase64Url(identity.key.privateKeyPem, bytes);
    const result = faults.tamperSignature
      ? new TextEncoder().encode(JSON.stringify({ ...(body as object), tampered: true }))
      : bytes;
    return {
      outcome: 'succeed',
      result,
      attested: { alg: identity.key.alg, signature, certificateSerial: identity.serial },
    };
  }

  function inventory(): Json {
    return {
      cpu: spec.cpu,
      memoryMiB: spec.memoryMiB,
      gpus: spec.gpus,
      nvswitches: spec.nvswitches,
      infiniband: Array.from({ length: spec.infinibandPorts }, (_, i) => ({ port: `mlx5_${i}`, rateGbps: 400 })),
      disks: spec.disks,
      macs: spec.macs,
      addresses: spec.addresses,
    } as unknown as Json;
  }

  async function ramdiskCommand(command: Command): Promise<SimOutcome> {
    const payload = (command.payload ?? {}) as Record<string, Json>;
    switch (command.kind) {
      case 'inspect.collect':
        return ok(inventory());
      case 'deploy.image': {
        const image = payload.image as { url: string; digest: string };
        const ref = payload.userDataRef as string | undefined;
        let userData: string | undefined;
        if (ref !== undefined) {
          try {
            userData = await env.fetchSecret(theAgent().nodeId, ref, command.id);
          } catch (error) {
            return failed(`could not fetch the user data (${(error as Error).message})`);
          }
        }
        const kind = payload.userDataKind as string | undefined;
        const source: InstallSource = {
          from: 'image',
          image,
          machine,
          ...(userData === undefined ? {} : { userData }),
          ...(kind === undefined ? {} : { userDataKind: kind }),
        };
        const plan = (await env.install?.(source)) ?? defaultInstall(source);
        disk = {
          image,
          userData: userData !== undefined,
          joined: false,
          os: plan,
          ...(kind ? { userDataKind: kind } : {}),
        };
        return ok({ written: true, digest: image.digest, device: spec.disks[0]?.device ?? null });
      }
      case 'boot.kexec':
        if (!disk.os) return failed('no image written to kexec into');
        return ok({ kexec: true }, () => restart('disk'));
      case 'disk.wipe': {
        disk = { userData: false, joined: false };
        return signed({
          commandId: command.id,
          wiped: true,
          mode: (payload.mode as string | undefined) ?? 'quick',
          disks: spec.disks.map((d) => d.device),
        });
      }
      case 'diag.dcgm':
        return ok({ level: (payload.level as number | undefined) ?? 1, result: 'pass', gpus: spec.gpus.length });
      default:
        return { outcome: 'reject', reason: `the ramdisk does not implement ${command.kind}` };
    }
  }

  async function osCommand(command: Command): Promise<SimOutcome> {
    const payload = (command.payload ?? {}) as Record<string, Json>;
    switch (command.kind) {
      case 'node.reboot':
        return ok({ rebooting: true }, () => restart('disk'));
      case 'daemon.upgrade':
        return ok({ upgrading: payload.url ?? null }, () => restart('same'));
      case 'health.resetGpus':
        return ok({ reset: (payload.gpus as Json | undefined) ?? spec.gpus.map((gpu) => gpu.uuid as string) });
      default:
        return { outcome: 'reject', reason: `bcd does not implement ${command.kind}` };
    }
  }

  const machine: MachineInternals = {
    index,
    spec,
    nodeId: undefined,
    siteId,
    get bmc() {
      return { ...bmc, media: { ...bmc.media } };
    },
    get disk() {
      return { ...disk };
    },
    get running() {
      return running;
    },
    get boots() {
      return boots;
    },
    get certificateSerial() {
      return identity?.serial;
    },
    get agent() {
      return theAgent();
    },
    faults,
    fail(match, reason = 'simulated failure', times = 1) {
      pending.push({ match, left: times, reason, hang: false });
    },
    hang(match, times = 1) {
      pending.push({ match, left: times, hang: true });
    },
    http(handler) {
      httpHandler = handler;
    },
    takeFault(command, operation) {
      const fault = pending.find(
        (f) =>
          f.left > 0 &&
          (typeof f.match === 'function' ? f.match(command) : f.match === command.kind || f.match === operation),
      );
      if (fault) fault.left -= 1;
      return fault;
    },
    async driver(operation, input) {
      switch (operation) {
        case 'power.getPower':
          return ok({ state: bmc.power });
        case 'power.setPower': {
          const action = input.action;
          if (action === 'off' || action === 'soft-off') {
            await powerOff();
          } else if (action === 'on') {
            if (bmc.power === 'off') {
              bmc.power = 'on';
              await boot();
            }
          } else if (action === 'cycle' || action === 'reset') {
            bmc.power = 'on';
            await boot();
          } else {
            return failed(`unknown power action ${String(action)}`);
          }
          return ok({ power: bmc.power });
        }
        case 'management.setBootDevice': {
          const device = String(input.device);
          if (input.persistent === true) {
            bmc.bootDevice = device;
            bmc.oneTimeBoot = undefined;
          } else {
            bmc.oneTimeBoot = device;
          }
          return ok({ device, persistent: input.persistent === true });
        }
        case 'virtual-media.insert': {
          const device = typeof input.device === 'string' ? input.device : 'cd';
          bmc.media[device] = String(input.url);
          return ok({ inserted: true, device });
        }
        case 'virtual-media.eject': {
          const device = typeof input.device === 'string' ? input.device : 'cd';
          delete bmc.media[device];
          return ok({ ejected: true, device });
        }
        case 'firmware.getInventory':
          return ok({ bmc: '1.9.3', bios: '2.4.1', gpu: '96.00.89.00.01', nic: '28.39.1002' });
        case 'bios.getSettings':
          return ok({ SriovGlobalEnable: 'Enabled', BootMode: 'Uefi', ProcSmt: 'Enabled' });
        default:
          return { outcome: 'reject', reason: `the ${bmc.driver} driver has no operation ${operation}` };
      }
    },
    agentCommand(command) {
      return running === 'ramdisk' ? ramdiskCommand(command) : osCommand(command);
    },
    httpRequest(request) {
      const address = request.url.hostname.replace(/^\[|\]$/g, '');
      if (!spec.addresses.includes(address)) return undefined;
      const own = httpHandler?.(request);
      if (own) return own;
      if (running === 'talos' && request.url.port === '50000' && request.url.pathname === '/machine/version') {
        return {
          status: 200,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ tag: 'v1.9.2', nodeId: machine.nodeId ?? null }),
        };
      }
      return undefined;
    },
    attachAgent(simAgent) {
      agent = simAgent;
    },
  };
  return machine;
}
