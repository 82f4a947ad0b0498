import { evaluateWhen } from '@better-compute/core';
import { describe, expect, it } from 'vitest';
import { checkInventory, inventoryLabels } from '../src';

const DGX = {
  cpu: { model: 'AMD EPYC 9654', sockets: 2, cores: 192 },
  memoryMiB: 2_097_152,
  gpus: Array.from({ length: 8 }, (_, i) => ({ model: 'H100', uuid: `GPU-${i}`, memoryMiB: 81_559, migCapable: true })),
  nvswitches: 4,
  infiniband: Array.from({ length: 8 }, (_, i) => ({ port: `mlx5_${i}`, rateGbps: 400 })),
  disks: [{ device: '/dev/nvme0n1', sizeBytes: 3_840_000_000_000 }],
  macs: ['AA:BB:CC:00:11:22'],
};

describe('an inspected inventory', () => {
  it('becomes the labels selectors read: GPU model and count, MIG, NVSwitch, InfiniBand, CPU, memory, disks', () => {
    const labels = inventoryLabels(checkInventory(DGX));
    expect(labels).toEqual({
      'gpu.model': 'H100',
      'gpu.count': '8',
      'mig.capable': 'true',
      nvswitch: 'true',
      'ib.ports': '8',
      'cpu.model': 'AMD EPYC 9654',
      'cpu.cores': '192',
      'memory.gib': '2048',
      'disk.count': '1',
    });
    expect(evaluateWhen('nvswitch && gpu.model=H100', labels)).toBe(true);
    expect(evaluateWhen('!mig.capable', labels)).toBe(false);
  });

  it('leaves out a fact that does not hold, so !nvswitch and !mig.capable read as expected', () => {
    const labels = inventoryLabels(
      checkInventory({ ...DGX, gpus: [{ model: 'L40S', uuid: 'GPU-0' }], nvswitches: 0, infiniband: [] }),
    );
    expect(labels).not.toHaveProperty('nvswitch');
    expect(labels).not.toHaveProperty('mig.capable');
    expect(labels).not.toHaveProperty('ib.ports');
    expect(evaluateWhen('!nvswitch && !mig.capable && gpu.model=L40S', labels)).toBe(true);
  });

  it('says mixed for a machine whose GPUs differ, and names no model for one that has none', () => {
    const mixed = inventoryLabels(
      checkInventory({
        ...DGX,
        gpus: [
          { model: 'H100', uuid: 'a' },
          { model: 'A100', uuid: 'b' },
        ],
      }),
    );
    expect(mixed['gpu.model']).toBe('mixed');
    const none = inventoryLabels(checkInventory({ ...DGX, gpus: [], nvswitches: 0 }));
    expect(none).not.toHaveProperty('gpu.model');
    expect(none['gpu.count']).toBe('0');
  });

  it('normalises MACs to lower case', () => {
    expect(checkInventory(DGX).macs).toEqual(['aa:bb:cc:00:11:22']);
  });

  it.each([
    ['a GPU without a model', { ...DGX, gpus: [{ uuid: 'x' }] }, ['gpus', 0, 'model']],
    ['a GPU model with a control character', { ...DGX, gpus: [{ model: 'H100\n', uuid: 'x' }] }, ['gpus', 0, 'model']],
    ['a GPU model with a NUL', { ...DGX, gpus: [{ model: 'H\u0000', uuid: 'x' }] }, ['gpus', 0, 'model']],
    ['a negative memory size', { ...DGX, memoryMiB: -1 }, ['memoryMiB']],
    ['a memory size beyond int4', { ...DGX, memoryMiB: 2 ** 31 }, ['memoryMiB']],
    ['a MAC that is not six octets', { ...DGX, macs: ['aa:bb:cc:dd:ee'] }, ['macs', 0]],
    ['a MAC with letters beyond hex', { ...DGX, macs: ['zz:bb:cc:dd:ee:ff'] }, ['macs', 0]],
    ['no MAC at all', { ...DGX, macs: [] }, ['macs']],
    ['more GPUs than a machine holds', { ...DGX, gpus: Array.from({ length: 65 }, () => DGX.gpus[0]) }, ['gpus']],
    ['a report that is not an object', 'inventory', []],
  ])('refuses %s with INVALID_INPUT at its path', (_, report, path) => {
    expect(() => checkInventory(report)).toThrowError(
      expect.objectContaining({ code: 'INVALID_INPUT', details: expect.objectContaining({ path }) }),
    );
  });
});
