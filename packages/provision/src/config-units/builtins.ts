import { field, manifest } from '@better-compute/core';
import { checkStringMap, refineSettings, type SettingsIssue, settled, stringMapJsonSchema } from './settings-schema';
import type { ConfigUnit } from './types';

// ---------------------------------------------------------------------------------------------------------------------
// kernel-modules

const MODULE_NAME = '^[A-Za-z0-9_-]+$';
const MODULE_PARAMETER = /^[A-Za-z_][A-Za-z0-9_]*$/;

const kernelModulesSettings = refineSettings(
  manifest({
    load: field
      .array(
        field.object({
          name: field.string({ pattern: MODULE_NAME, maxLength: 64 }).describe('The module, e.g. nvidia_peermem'),
          parameters: field
            .json()
            .optional()
            .describe(
              'Module parameters, name → value, written to modprobe.d (e.g. { "NVreg_EnableGpuFirmware": "1" })',
            ),
        }),
        { maxItems: 128 },
      )
      .default([])
      .describe('Modules loaded at boot (modules-load.d) and now, in this order'),
    blacklist: field
      .array(field.string({ pattern: MODULE_NAME, maxLength: 64 }), { maxItems: 128 })
      .default([])
      .describe('Modules never loaded, e.g. nouveau'),
  }),
  (settings) => {
    const issues: SettingsIssue[] = [];
    const seen = new Set<string>();
    const load = settings.load.map((entry, i) => {
      if (seen.has(entry.name)) issues.push({ path: ['load', i, 'name'], message: `${entry.name} is listed twice` });
      seen.add(entry.name);
      if (entry.parameters === undefined) return { name: entry.name };
      const parameters = checkStringMap(
        entry.parameters,
        ['load', i, 'parameters'],
        { key: MODULE_PARAMETER, keyShape: 'a module parameter name like NVreg_EnableGpuFirmware', coerce: true },
        issues,
      );
      return { name: entry.name, parameters };
    });
    settings.blacklist.forEach((name, i) => {
      if (seen.has(name)) issues.push({ path: ['blacklist', i], message: `${name} is both loaded and blacklisted` });
    });
    return settled(issues, { load, blacklist: settings.blacklist });
  },
);

// ---------------------------------------------------------------------------------------------------------------------
// sysctl

/** A sysctl key: dotted, lower-case first segment (`vm.swappiness`, `net.ipv4.conf.eth0/100.rp_filter`). */
const SYSCTL_KEY = /^[a-z][a-z0-9_]*(\.[A-Za-z0-9_:@/-]+)+$/;

const sysctlSettings = refineSettings(
  manifest({
    values: field
      .json()
      .describe('sysctl key → value, e.g. { "vm.nr_hugepages": "1024", "net.core.rmem_max": "268435456" }'),
  }),
  (settings) => {
    const issues: SettingsIssue[] = [];
    const values = checkStringMap(
      settings.values,
      ['values'],
      { key: SYSCTL_KEY, keyShape: 'dotted, like net.core.rmem_max', coerce: true },
      issues,
    );
    return settled(issues, { values });
  },
  { values: stringMapJsonSchema(SYSCTL_KEY, true) },
);

// ---------------------------------------------------------------------------------------------------------------------
// hugepages

// 1 GiB pages are reserved at boot; 4096 of them is 4 TiB, more than any GPU host carries. 2 MiB pages: up to 2 TiB.
const MAX_1G_PAGES = 4096;

const hugepagesSettings = refineSettings(
  manifest({
    size: field
      .enum(['2M', '1G'])
      .default('2M')
      .describe('The page size; 1G pages are reserved on the kernel command line'),
    count: field.int({ min: 0, max: 1_048_576 }).describe('How many pages to reserve (0 releases them)'),
    numaNode: field
      .int({ min: 0, max: 63 })
      .optional()
      .describe('Reserve on this NUMA node only (next to the GPUs that use them); by default spread by the kernel'),
  }),
  (settings) => {
    const issues: SettingsIssue[] = [];
    if (settings.size === '1G' && settings.count > MAX_1G_PAGES) {
      issues.push({ path: ['count'], message: `must be at most ${MAX_1G_PAGES} for 1G pages` });
    }
    return settled(issues, settings);
  },
);

// ---------------------------------------------------------------------------------------------------------------------
// nvidia-driver

const DRIVER_BRANCH = '^[0-9]{3}$';
const DRIVER_VERSION = '^[0-9]{3}\\.[0-9]{1,3}(\\.[0-9]{1,3})?$';
// The open GPU kernel modules ship from branch 515.
const FIRST_OPEN_KERNEL_BRANCH = 515;

const nvidiaDriverSettings = refineSettings(
  manifest({
    branch: field
      .string({ pattern: DRIVER_BRANCH })
      .describe('The driver branch, e.g. 550 or 570; the newest release of it when version is left out'),
    version: field.string({ pattern: DRIVER_VERSION }).optional().describe('An exact release, e.g. 570.124.06'),
    openKernel: field
      .boolean()
      .default(true)
      .describe('Use the open GPU kernel modules (recommended from Turing on, the default from branch 560)'),
    persistenceMode: field.boolean().default(true).describe('Run nvidia-persistenced so the GPUs stay initialised'),
  }),
  (settings) => {
    const issues: SettingsIssue[] = [];
    if (settings.version !== undefined && !settings.version.startsWith(`${settings.branch}.`)) {
      issues.push({ path: ['version'], message: `${settings.version} is not a release of branch ${settings.branch}` });
    }
    if (settings.openKernel && Number(settings.branch) < FIRST_OPEN_KERNEL_BRANCH) {
      issues.push({
        path: ['openKernel'],
        message: `the open kernel modules ship from branch ${FIRST_OPEN_KERNEL_BRANCH}; set openKernel: false`,
      });
    }
    return settled(issues, settings);
  },
);

// ---------------------------------------------------------------------------------------------------------------------
// fabric-manager

const fabricManagerSettings = manifest({
  mode: field
    .enum(['full-passthrough', 'shared-nvswitch', 'vgpu'])
    .default('full-passthrough')
    .describe('FABRIC_MODE: 0 bare metal or full passthrough, 1 shared NVSwitch multitenancy, 2 vGPU'),
  version: field
    .string({ pattern: DRIVER_VERSION })
    .optional()
    .describe('Must equal the installed driver release; by default the one the nvidia-driver unit installs'),
  logLevel: field.int({ min: 0, max: 5 }).default(4).describe('LOG_LEVEL: 0 none … 5 debug'),
});

// ---------------------------------------------------------------------------------------------------------------------
// mig-layout

/** A MIG profile name: `1g.10gb`, `3g.40gb`, `1g.10gb+me`, `7g.80gb`, or a compute-instance one like `1c.3g.40gb`. */
const MIG_PROFILE = /^([1-7]c\.)?[1-8]g\.[0-9]{1,3}gb(\+[a-z][a-z.]*)?$/;
// A100, H100, H200 and B200 GPUs split into seven compute slices.
const MIG_SLICES = 7;

const migLayoutSettings = refineSettings(
  manifest({
    devices: field
      .array(
        field.object({
          gpus: field
            .array(field.int({ min: 0, max: 63 }), { minItems: 1, maxItems: 64 })
            .optional()
            .describe('GPU indexes; every GPU when left out'),
          enabled: field.boolean().default(true).describe('Whether MIG mode is on for these GPUs'),
          profiles: field
            .json()
            .optional()
            .describe('MIG profile → instances per GPU, e.g. { "3g.40gb": 2 } or { "1g.10gb": 7 }'),
        }),
        { minItems: 1, maxItems: 64 },
      )
      .describe('The layout, like nvidia-mig-parted: which GPUs get which MIG instances'),
  }),
  (settings) => {
    const issues: SettingsIssue[] = [];
    const owner = new Map<number, number>();
    const devices = settings.devices.map((entry, i) => {
      const path = ['devices', i];
      if (entry.gpus === undefined && settings.devices.length > 1) {
        issues.push({
          path: [...path, 'gpus'],
          message: 'an entry without gpus covers every GPU, so it must be the only entry',
        });
      }
      entry.gpus?.forEach((gpu, k) => {
        const first = owner.get(gpu);
        if (first !== undefined)
          issues.push({ path: [...path, 'gpus', k], message: `GPU ${gpu} is already in devices.${first}` });
        else owner.set(gpu, i);
      });
      const profiles: { [name: string]: number } = {};
      if (entry.profiles !== undefined) {
        const raw = entry.profiles;
        if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
          issues.push({ path: [...path, 'profiles'], message: 'expected an object of MIG profile → count' });
        } else {
          let slices = 0;
          for (const [name, count] of Object.entries(raw)) {
            const at = [...path, 'profiles', name];
            if (!MIG_PROFILE.test(name)) {
              issues.push({ path: at, message: `${JSON.stringify(name)} is not a MIG profile name like 3g.40gb` });
            } else if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 1 || count > MIG_SLICES) {
              issues.push({ path: at, message: `must be a whole number from 1 to ${MIG_SLICES}` });
            } else {
              profiles[name] = count;
              // Compute-instance profiles (1c.3g.40gb) subdivide a GPU instance and take no slices of their own.
              if (!name.includes('c.')) slices += Number(name.split('g.')[0]) * count;
            }
          }
          if (slices > MIG_SLICES) {
            issues.push({
              path: [...path, 'profiles'],
              message: `uses ${slices} compute slices; a GPU has ${MIG_SLICES}`,
            });
          }
        }
      }
      if (!entry.enabled && Object.keys(profiles).length > 0) {
        issues.push({ path: [...path, 'profiles'], message: 'MIG is disabled on these GPUs (enabled: false)' });
      }
      return { ...(entry.gpus ? { gpus: entry.gpus } : {}), enabled: entry.enabled, profiles };
    });
    return settled(issues, { devices });
  },
);

// ---------------------------------------------------------------------------------------------------------------------
// gpu-sharing

// CUDA MPS serves at most 48 clients per GPU (Volta and later).
const MAX_MPS_CLIENTS = 48;

const gpuSharingSettings = refineSettings(
  manifest({
    strategy: field.enum(['time-slicing', 'mps']).describe('How several containers share one GPU'),
    replicas: field.int({ min: 2, max: 128 }).describe('How many shares each GPU is advertised as'),
    resourceName: field
      .string({ pattern: '^[a-z0-9]([a-z0-9.-]*[a-z0-9])?/[a-z0-9]([a-z0-9.-]*[a-z0-9])?$', maxLength: 253 })
      .default('nvidia.com/gpu')
      .describe('The extended resource the shares are advertised as'),
    renameByDefault: field
      .boolean()
      .default(false)
      .describe('Advertise the shares as <resource>.shared instead of <resource>'),
    failRequestsGreaterThanOne: field
      .boolean()
      .default(true)
      .describe('Refuse pods asking for more than one share, which would not get more GPU'),
  }),
  (settings) => {
    const issues: SettingsIssue[] = [];
    if (settings.strategy === 'mps' && settings.replicas > MAX_MPS_CLIENTS) {
      issues.push({ path: ['replicas'], message: `MPS serves at most ${MAX_MPS_CLIENTS} clients per GPU` });
    }
    return settled(issues, settings);
  },
);

// ---------------------------------------------------------------------------------------------------------------------
// container-toolkit

const containerToolkitSettings = manifest({
  runtime: field
    .enum(['containerd', 'docker', 'cri-o'])
    .default('containerd')
    .describe('The container runtime nvidia-ctk configures'),
  setAsDefault: field.boolean().default(true).describe('Make the nvidia runtime the default runtime'),
  cdi: field.boolean().default(true).describe('Generate the CDI specification (/etc/cdi/nvidia.yaml)'),
  version: field
    .string({ pattern: '^[0-9]+\\.[0-9]+\\.[0-9]+(-[0-9A-Za-z.-]+)?$' })
    .optional()
    .describe('An exact NVIDIA Container Toolkit release, e.g. 1.17.4; the newest when left out'),
});

// ---------------------------------------------------------------------------------------------------------------------
// k8s-join

const HOST_PORT = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):([0-9]{1,5})$/;
const K8S_NAME = '[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?';
const K8S_PREFIX = '[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?';
/** A Kubernetes label (or taint) key: an optional DNS prefix and `/`, then a name of at most 63 characters. */
const K8S_LABEL_KEY = new RegExp(`^(${K8S_PREFIX}/)?${K8S_NAME}$`);
const K8S_LABEL_VALUE = new RegExp(`^(${K8S_NAME})?$`);

const k8sJoinSettings = refineSettings(
  manifest({
    endpoint: field
      .string({ pattern: HOST_PORT.source, maxLength: 261 })
      .describe('The API server as host:port, e.g. k8s-api.example.com:6443'),
    tokenRef: field.secretRef().describe('The bootstrap token (abcdef.0123456789abcdef), stored in the secret broker'),
    caCertHashes: field
      .array(field.string({ pattern: '^sha256:[0-9a-f]{64}$' }), { minItems: 1, maxItems: 8 })
      .describe('--discovery-token-ca-cert-hash values; the cluster CA is always pinned'),
    role: field.enum(['worker', 'control-plane']).default('worker'),
    certificateKeyRef: field
      .secretRef()
      .optional()
      .describe('The key that decrypts the uploaded control-plane certificates; control-plane joins only'),
    nodeLabels: field.json().optional().describe('Labels the node registers with, key → value'),
    taints: field
      .array(
        field.object({
          key: field.string({ pattern: K8S_LABEL_KEY.source, maxLength: 317 }),
          value: field.string({ pattern: K8S_LABEL_VALUE.source, maxLength: 63 }).optional(),
          effect: field.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']),
        }),
        { maxItems: 64 },
      )
      .default([])
      .describe('Taints the node registers with, e.g. { key: nvidia.com/gpu, effect: NoSchedule }'),
  }),
  (settings) => {
    const issues: SettingsIssue[] = [];
    const port = Number(HOST_PORT.exec(settings.endpoint)?.[3]);
    if (!(port >= 1 && port <= 65535)) issues.push({ path: ['endpoint'], message: 'the port must be 1 to 65535' });
    if (settings.role === 'control-plane' && settings.certificateKeyRef === undefined) {
      issues.push({ path: ['certificateKeyRef'], message: 'a control-plane join needs the certificate key' });
    }
    if (settings.role === 'worker' && settings.certificateKeyRef !== undefined) {
      issues.push({ path: ['certificateKeyRef'], message: 'only a control-plane join takes a certificate key' });
    }
    const nodeLabels =
      settings.nodeLabels === undefined
        ? undefined
        : checkStringMap(
            settings.nodeLabels,
            ['nodeLabels'],
            {
              key: K8S_LABEL_KEY,
              keyShape: 'a Kubernetes label key like nvidia.com/gpu.product',
              maxKeyLength: 317,
              value: K8S_LABEL_VALUE,
              valueShape: 'a Kubernetes label value: at most 63 letters, digits, -, _ and .',
              maxValueLength: 63,
              maxEntries: 256,
            },
            issues,
          );
    return settled(issues, { ...settings, ...(nodeLabels ? { nodeLabels } : {}) });
  },
  { nodeLabels: stringMapJsonSchema(K8S_LABEL_KEY) },
);

/**
 * The config units that ship with provision, in the order a host applies them in practice. A unit given to
 * `provisionModule({ configUnits })` with one of these names replaces it.
 *
 * @example
 * ```ts
 * BUILTIN_CONFIG_UNITS.map((unit) => unit.name); // ['kernel-modules', 'sysctl', 'hugepages', …, 'k8s-join']
 * ```
 */
export const BUILTIN_CONFIG_UNITS: readonly ConfigUnit[] = Object.freeze(
  [
    {
      name: 'kernel-modules',
      description: 'Kernel modules to load at boot (with their parameters) and to blacklist',
      settings: kernelModulesSettings,
    },
    {
      name: 'sysctl',
      description: 'Kernel parameters, written to /etc/sysctl.d and applied',
      settings: sysctlSettings,
    },
    {
      name: 'hugepages',
      description: 'Huge pages reserved for the host (2M at runtime, 1G on the kernel command line)',
      settings: hugepagesSettings,
    },
    {
      name: 'nvidia-driver',
      description: 'The NVIDIA datacenter driver: branch, exact release, open or proprietary kernel modules',
      settings: nvidiaDriverSettings,
    },
    {
      name: 'fabric-manager',
      description: 'NVIDIA Fabric Manager for NVSwitch systems (HGX A100/H100/H200); its release follows the driver',
      settings: fabricManagerSettings,
    },
    {
      name: 'mig-layout',
      description: 'The MIG layout of the GPUs, as nvidia-mig-parted applies it',
      settings: migLayoutSettings,
    },
    {
      name: 'gpu-sharing',
      description: 'GPU sharing for the Kubernetes device plugin: time-slicing or MPS replicas',
      settings: gpuSharingSettings,
    },
    {
      name: 'container-toolkit',
      description: 'The NVIDIA Container Toolkit and the runtime it configures',
      settings: containerToolkitSettings,
    },
    {
      name: 'k8s-join',
      description: 'Joins the host to a Kubernetes cluster with kubeadm (bootstrap token from the secret broker)',
      settings: k8sJoinSettings,
    },
  ].map((unit) => Object.freeze(unit)),
);
