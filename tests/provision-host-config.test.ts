import { type ComputeError, field, isComputeError, manifest } from 'better-compute/core';
import {
  BUILTIN_CONFIG_UNIT_REGISTRY,
  BUILTIN_CONFIG_UNITS,
  type ConfigUnit,
  createConfigUnitRegistry,
  type ProfileDefinition,
  provisionModule,
  resolveHostSection,
  retryWorkflow,
} from 'better-compute/provision';
import { settle } from 'better-compute/testkit';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BACKENDS, type ScratchDatabase } from './support/databases';
import { createEngineLab, type EngineLab, stepStates } from './support/engine-lab';
import { errorOf, rejectionOf } from './support/errors';

// Config units (steps-and-profiles.md "Config units"): the built-ins' settings, replacement by name, `when`, and the
// engine hook that turns a succeeded workflow's hostConfig into the node's NodeSpec `host` section.

function computeError(error: unknown, code: ComputeError['code']): ComputeError {
  expect(isComputeError(error), String(error)).toBe(true);
  expect((error as ComputeError).code).toBe(code);
  return error as ComputeError;
}

const resolve = (units: unknown[], labels: Record<string, string> = {}, registry = BUILTIN_CONFIG_UNIT_REGISTRY) =>
  resolveHostSection(registry, { units }, labels);

const SECRET_REF = 'sec_01jqz3k5m8n9p0q1r2s3t4v5w6';
const CA_HASH = `sha256:${'3f'.repeat(32)}`;

/** Per built-in: a realistic setting, what it resolves to, and a bad one with the path it is refused at. */
const BUILTINS: {
  name: string;
  good: Record<string, unknown>;
  resolved: Record<string, unknown>;
  bad: Record<string, unknown>;
  badPath: (string | number)[];
}[] = [
  {
    name: 'kernel-modules',
    good: {
      load: [
        { name: 'nvidia', parameters: { NVreg_EnableStreamMemOPs: 1, NVreg_RegistryDwords: 'PeerMappingOverride=1' } },
        { name: 'nvidia_peermem' },
      ],
      blacklist: ['nouveau'],
    },
    resolved: {
      load: [
        {
          name: 'nvidia',
          parameters: { NVreg_EnableStreamMemOPs: '1', NVreg_RegistryDwords: 'PeerMappingOverride=1' },
        },
        { name: 'nvidia_peermem' },
      ],
      blacklist: ['nouveau'],
    },
    bad: { load: [{ name: 'nvidia' }], blacklist: ['nouveau', 'nvidia'] },
    badPath: ['blacklist', 1],
  },
  {
    name: 'sysctl',
    good: { values: { 'vm.swappiness': 10, 'net.core.rmem_max': '268435456', 'kernel.numa_balancing': '0' } },
    resolved: { values: { 'vm.swappiness': '10', 'net.core.rmem_max': '268435456', 'kernel.numa_balancing': '0' } },
    bad: { values: { 'vm.swappiness': '10\nkernel.panic=0' } },
    badPath: ['values', 'vm.swappiness'],
  },
  {
    name: 'hugepages',
    good: { size: '1G', count: 64, numaNode: 1 },
    resolved: { size: '1G', count: 64, numaNode: 1 },
    bad: { size: '2M', count: -1 },
    badPath: ['count'],
  },
  {
    name: 'nvidia-driver',
    good: { branch: '570', version: '570.124.06' },
    resolved: { branch: '570', version: '570.124.06', openKernel: true, persistenceMode: true },
    bad: { branch: '570', version: '550.90.07' },
    badPath: ['version'],
  },
  {
    name: 'fabric-manager',
    good: { version: '570.124.06' },
    resolved: { mode: 'full-passthrough', version: '570.124.06', logLevel: 4 },
    bad: { mode: 'nvlink' },
    badPath: ['mode'],
  },
  {
    name: 'mig-layout',
    good: {
      devices: [
        { gpus: [0, 1, 2, 3], profiles: { '3g.40gb': 2 } },
        { gpus: [4, 5, 6, 7], profiles: { '1g.10gb': 7 } },
      ],
    },
    resolved: {
      devices: [
        { gpus: [0, 1, 2, 3], enabled: true, profiles: { '3g.40gb': 2 } },
        { gpus: [4, 5, 6, 7], enabled: true, profiles: { '1g.10gb': 7 } },
      ],
    },
    // Two 4g instances need eight compute slices; a GPU has seven.
    bad: { devices: [{ profiles: { '4g.40gb': 2 } }] },
    badPath: ['devices', 0, 'profiles'],
  },
  {
    name: 'gpu-sharing',
    good: { strategy: 'time-slicing', replicas: 4 },
    resolved: {
      strategy: 'time-slicing',
      replicas: 4,
      resourceName: 'nvidia.com/gpu',
      renameByDefault: false,
      failRequestsGreaterThanOne: true,
    },
    bad: { strategy: 'mps', replicas: 64 },
    badPath: ['replicas'],
  },
  {
    name: 'container-toolkit',
    good: { runtime: 'containerd', version: '1.17.4' },
    resolved: { runtime: 'containerd', setAsDefault: true, cdi: true, version: '1.17.4' },
    bad: { runtime: 'podman' },
    badPath: ['runtime'],
  },
  {
    name: 'k8s-join',
    good: {
      endpoint: 'k8s-api.fleet.example.com:6443',
      tokenRef: SECRET_REF,
      caCertHashes: [CA_HASH],
      nodeLabels: { 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3' },
      taints: [{ key: 'nvidia.com/gpu', effect: 'NoSchedule' }],
    },
    resolved: {
      endpoint: 'k8s-api.fleet.example.com:6443',
      tokenRef: SECRET_REF,
      caCertHashes: [CA_HASH],
      role: 'worker',
      nodeLabels: { 'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3' },
      taints: [{ key: 'nvidia.com/gpu', effect: 'NoSchedule' }],
    },
    // A bootstrap token is never written into the profile: only a secret reference is.
    bad: { endpoint: 'k8s-api.fleet.example.com:6443', tokenRef: 'abcdef.0123456789abcdef', caCertHashes: [CA_HASH] },
    badPath: ['tokenRef'],
  },
];

describe('the built-in config units', () => {
  it('are the nine the page names', () => {
    expect(BUILTIN_CONFIG_UNITS.map((u) => u.name)).toEqual(BUILTINS.map((b) => b.name));
    for (const unit of BUILTIN_CONFIG_UNITS) expect(unit.description.length).toBeGreaterThan(0);
  });

  it.each(BUILTINS)('$name accepts a realistic setting, with defaults applied', async ({ name, good, resolved }) => {
    const host = await resolve([{ name, settings: good }]);
    expect(host).toEqual({ units: [{ name, settings: resolved }] });
  });

  it.each(BUILTINS)('$name refuses a bad setting with INVALID_INPUT at its path', async ({ name, bad, badPath }) => {
    // Two valid units before it, so the path names the third.
    const fillers = [
      { name: 'sysctl', settings: { values: {} } },
      { name: 'container-toolkit' },
      { name: 'fabric-manager' },
    ].filter((unit) => unit.name !== name);
    const units = [...fillers.slice(0, 2), { name, settings: bad }];
    const error = computeError(await rejectionOf(() => resolve(units)), 'INVALID_INPUT');
    expect(error.details.path).toEqual(['hostConfig', 'units', 2, 'settings', ...badPath]);
  });

  it('refuses a required setting left out, and lists every issue', async () => {
    const error = computeError(
      await rejectionOf(() => resolve([{ name: 'nvidia-driver' }, { name: 'hugepages', settings: { count: 1e9 } }])),
      'INVALID_INPUT',
    );
    expect(error.details.path).toEqual(['hostConfig', 'units', 0, 'settings', 'branch']);
    expect(error.details.issues?.map((i) => i.path)).toEqual([
      ['hostConfig', 'units', 0, 'settings', 'branch'],
      ['hostConfig', 'units', 1, 'settings', 'count'],
    ]);
  });

  it('refuses an unknown unit with INVALID_INPUT at its name', async () => {
    const error = computeError(
      await rejectionOf(() => resolve([{ name: 'sysctl', settings: { values: {} } }, { name: 'acme-bios' }])),
      'INVALID_INPUT',
    );
    expect(error.details.path).toEqual(['hostConfig', 'units', 1, 'name']);
    expect(error.message).toContain('acme-bios');
  });

  it('describes its settings as JSON Schema, maps included', () => {
    const sysctl = BUILTIN_CONFIG_UNIT_REGISTRY.get('sysctl')?.settings as unknown as {
      toJsonSchema(): Record<string, unknown>;
    };
    expect(sysctl.toJsonSchema()).toMatchObject({
      type: 'object',
      required: ['values'],
      properties: { values: { type: 'object', additionalProperties: { type: ['string', 'number', 'boolean'] } } },
    });
  });
});

const nicFirmware: ConfigUnit = {
  name: 'acme-nic-firmware',
  description: 'Pins the NIC firmware branch',
  settings: manifest({ branch: field.string({ pattern: '^[0-9]+\\.[0-9]+$' }) }),
};

describe('config units given to provisionModule', () => {
  it('adds a unit, and a unit named like a built-in replaces it', async () => {
    const sysctl: ConfigUnit = {
      name: 'sysctl',
      description: 'Tuned profiles instead of raw sysctl values',
      settings: manifest({ profile: field.enum(['throughput-performance', 'latency-performance']) }),
    };
    const units = provisionModule({ configUnits: [nicFirmware, sysctl] }).engine.configUnits;
    expect(units.get('sysctl')?.settings).toBe(sysctl.settings);
    expect(units.get('hugepages')).toBe(BUILTIN_CONFIG_UNIT_REGISTRY.get('hugepages'));
    const host = await resolve(
      [
        { name: 'acme-nic-firmware', settings: { branch: '22.31' } },
        { name: 'sysctl', settings: { profile: 'latency-performance' } },
      ],
      {},
      units,
    );
    expect(host.units.map((u) => u.settings)).toEqual([{ branch: '22.31' }, { profile: 'latency-performance' }]);
    const error = computeError(
      await rejectionOf(() =>
        resolve([{ name: 'sysctl', settings: { values: { 'vm.swappiness': '10' } } }], {}, units),
      ),
      'INVALID_INPUT',
    );
    // The replaced built-in's shape no longer passes.
    expect(error.details.issues?.map((i) => i.path)).toEqual([
      ['hostConfig', 'units', 0, 'settings', 'profile'],
      ['hostConfig', 'units', 0, 'settings', 'values'],
    ]);
    const bad = computeError(
      await rejectionOf(() => resolve([{ name: 'acme-nic-firmware', settings: { branch: 'latest' } }], {}, units)),
      'INVALID_INPUT',
    );
    expect(bad.details.path).toEqual(['hostConfig', 'units', 0, 'settings', 'branch']);
  });

  it.each([
    [
      [nicFirmware, { ...nicFirmware }],
      ['configUnits', 1, 'name'],
    ],
    [[{ ...nicFirmware, name: 'Acme NIC' }], ['configUnits', 0, 'name']],
    [[{ ...nicFirmware, settings: { parse() {} } }], ['configUnits', 0, 'settings']],
    [[{ ...nicFirmware, when: 'nvswitch' }], ['configUnits', 0, 'when']],
  ])('refuses a malformed unit list with INVALID_CONFIG at its path (%#)', (configUnits, path) => {
    const error = computeError(
      errorOf(() => createConfigUnitRegistry(configUnits as ConfigUnit[])),
      'INVALID_CONFIG',
    );
    expect(error.details.path).toEqual(path);
  });
});

describe('when: on a unit', () => {
  const units = [
    { name: 'nvidia-driver', settings: { branch: '570' } },
    { name: 'fabric-manager', when: 'nvswitch' },
    { name: 'mig-layout', when: 'mig.capable && !k8s.shared', settings: { devices: [{ profiles: { '7g.80gb': 1 } }] } },
    // Its settings are wrong, but it is off on these nodes, so they are not looked at.
    { name: 'gpu-sharing', when: 'gpu.model=A10', settings: { strategy: 'mps', replicas: 1000 } },
  ];

  it('leaves out the units whose when is false on the labels', async () => {
    const hgx = await resolve(units, { nvswitch: 'true', 'mig.capable': 'true' });
    expect(hgx.units.map((u) => u.name)).toEqual(['nvidia-driver', 'fabric-manager', 'mig-layout']);
    const pcie = await resolve(units, { 'mig.capable': 'true', 'k8s.shared': 'true' });
    expect(pcie.units.map((u) => u.name)).toEqual(['nvidia-driver']);
  });

  it('refuses a malformed when at its path', async () => {
    const error = computeError(
      await rejectionOf(() => resolve([{ name: 'hugepages', when: 'a &&', settings: { count: 1 } }])),
      'INVALID_INPUT',
    );
    expect(error.details.path).toEqual(['hostConfig', 'units', 0, 'when']);
  });
});

const HOST_CONFIG: NonNullable<ProfileDefinition['hostConfig']> = {
  units: [
    { name: 'nvidia-driver', settings: { branch: '570', version: '570.124.06' } },
    { name: 'fabric-manager', when: 'nvswitch' },
    { name: 'mig-layout', when: 'mig.capable', settings: { devices: [{ profiles: { '3g.40gb': 2 } }] } },
    { name: 'hugepages', settings: { size: '1G', count: 64 } },
  ],
};

async function nodeRow(lab: EngineLab, nodeId = lab.nodeId) {
  const { rows } = await lab.db.query<{ spec: Record<string, unknown>; generation: string | number }>(
    'SELECT spec, generation FROM nodes WHERE id = $1',
    [nodeId],
  );
  return { spec: rows[0]?.spec, generation: Number(rows[0]?.generation) };
}

describe.each(BACKENDS)('the host-config hook on $name', ({ create }) => {
  let scratch: ScratchDatabase;
  let lab: EngineLab;
  beforeAll(async () => {
    scratch = await create();
    lab = await createEngineLab(scratch.db, { provision: { configUnits: [nicFirmware] } });
  });
  afterAll(async () => {
    await lab?.close();
    await scratch?.drop();
  });
  beforeEach(async () => {
    await lab.reset({ labels: { nvswitch: 'true' } });
  });

  it('refuses at start a hostConfig naming an unknown unit, among the other issues', async () => {
    const error = computeError(
      await rejectionOf(() =>
        lab.start({
          id: 'hc-unknown',
          steps: [{ use: 'acme.missing' }],
          hostConfig: { units: [{ name: 'sysctl', settings: { values: {} } }, { name: 'acme-bios' }] },
        }),
      ),
      'INVALID_INPUT',
    );
    expect(error.details.issues?.map((i) => i.path)).toEqual([
      ['steps', 0, 'use'],
      ['hostConfig', 'units', 1, 'name'],
    ]);
    const { rows } = await lab.db.query('SELECT id FROM workflows');
    expect(rows).toEqual([]);
  });

  it("refuses at start invalid settings, whatever the unit's when", async () => {
    const error = computeError(
      await rejectionOf(() =>
        lab.start({
          id: 'hc-invalid',
          steps: [{ use: 'lab.noop' }],
          hostConfig: {
            units: [
              { name: 'nvidia-driver', settings: { branch: '570' } },
              { name: 'fabric-manager', when: 'nvswitch' },
              { name: 'hugepages', when: 'never.set', settings: { count: -1 } },
            ],
          },
        }),
      ),
      'INVALID_INPUT',
    );
    expect(error.details.path).toEqual(['hostConfig', 'units', 2, 'settings', 'count']);
  });

  it("sets the node's spec.host on success, on the labels as they are then, and bumps generation", async () => {
    await lab.db.query(`UPDATE nodes SET spec = '{"os": {"image": "ubuntu/noble@24.04.1"}}' WHERE id = $1`, [
      lab.nodeId,
    ]);
    const id = await lab.start({ id: 'hc-deploy', steps: [{ use: 'lab.noop' }], hostConfig: HOST_CONFIG });
    // The node becomes MIG-capable while the workflow runs: the section follows the labels at the end.
    await lab.db.query(`UPDATE nodes SET labels = '{"nvswitch": "true", "mig.capable": "true"}' WHERE id = $1`, [
      lab.nodeId,
    ]);
    expect(await nodeRow(lab)).toMatchObject({ generation: 1 });
    await lab.settle();
    expect((await lab.workflow(id)).state).toBe('succeeded');
    const node = await nodeRow(lab);
    expect(node.generation).toBe(2);
    expect(node.spec).toEqual({
      os: { image: 'ubuntu/noble@24.04.1' },
      host: {
        units: [
          {
            name: 'nvidia-driver',
            settings: { branch: '570', version: '570.124.06', openKernel: true, persistenceMode: true },
          },
          { name: 'fabric-manager', settings: { mode: 'full-passthrough', logLevel: 4 } },
          { name: 'mig-layout', settings: { devices: [{ enabled: true, profiles: { '3g.40gb': 2 } }] } },
          { name: 'hugepages', settings: { size: '1G', count: 64 } },
        ],
      },
    });
    expect(await lab.eventTypes(id)).toContain('workflow.succeeded');
  });

  it('leaves spec and generation alone when the workflow fails', async () => {
    const id = await lab.start({ id: 'hc-fail', steps: [{ use: 'lab.throw' }], hostConfig: HOST_CONFIG });
    await lab.settle();
    expect((await lab.workflow(id)).state).toBe('failed');
    expect(await nodeRow(lab)).toEqual({ spec: {}, generation: 1 });
  });

  it('leaves spec alone for a succeeded workflow without hostConfig', async () => {
    const id = await lab.start({ id: 'hc-none', steps: [{ use: 'lab.noop' }] });
    await lab.settle();
    expect((await lab.workflow(id)).state).toBe('succeeded');
    expect(await nodeRow(lab)).toEqual({ spec: {}, generation: 1 });
  });

  it('fails the workflow with INVALID_INPUT when the hostConfig no longer resolves as it ends, and a retry resolves it again', async () => {
    const profile = {
      id: 'hc-moved',
      steps: [{ use: 'lab.noop' }],
      hostConfig: { units: [{ name: 'acme-nic-firmware', settings: { branch: '22.31' } }] },
    };
    const id = await lab.start(profile);
    // A worker of a release without the acme unit runs the workflow to its end.
    const other = await createEngineLab(scratch.db, { clock: lab.clock });
    try {
      await settle(other.compute, { clock: lab.clock });
    } finally {
      await other.close();
    }
    const failed = await lab.workflow(id);
    expect(stepStates(failed)).toEqual(['main.1:succeeded']);
    expect(failed).toMatchObject({
      state: 'failed',
      error: {
        code: 'INVALID_INPUT',
        stepId: 'hostConfig',
        action: 'hostConfig',
        path: ['hostConfig', 'units', 0, 'name'],
      },
    });
    expect(failed.error?.message).toContain('acme-nic-firmware');
    expect(await nodeRow(lab)).toEqual({ spec: {}, generation: 1 });
    expect((await lab.eventTypes(id)).slice(-1)).toEqual(['workflow.failed']);

    // Back on a worker that knows the unit, a retry re-runs no step and sets the host section.
    await retryWorkflow(lab.compute.context, { workflowId: id });
    await lab.settle();
    const retried = await lab.workflow(id);
    expect(retried).toMatchObject({ state: 'succeeded', error: null });
    expect(retried.steps[0]?.attempt).toBe(0);
    expect(await nodeRow(lab)).toEqual({
      spec: { host: { units: [{ name: 'acme-nic-firmware', settings: { branch: '22.31' } }] } },
      generation: 2,
    });
  });
});
