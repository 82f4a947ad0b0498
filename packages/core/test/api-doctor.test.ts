import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, createCredential, createOpenApiDocument, type DoctorApi } from '../src/api';
import { ComputeError } from '../src/errors';
import { betterCompute, type Compute, type ComputeModule } from '../src/kernel';
import { manualClock } from './support/kernel';

// The core module's `doctor` group: every module's findings, a failing provider as an error finding naming its module,
// root credentials only. And the core groups in the OpenAPI document.

const clock = manualClock();
let compute: Compute;
let api: ApiClient<{ doctor: DoctorApi }>;
let root: string;
let rootReader: string;
let acme: string;

const healthy: ComputeModule = {
  id: 'healthy',
  findings: async () => [{ id: 'disk-low', severity: 'warning', message: 'disk is low', details: { free: 3 } }],
};
const broken: ComputeModule = {
  id: 'broken',
  findings: async () => {
    throw new Error('password=hunter2 leaked in a message');
  },
};
const quiet: ComputeModule = { id: 'quiet' };

async function refusal(promise: Promise<unknown>): Promise<ComputeError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ComputeError);
  return error as ComputeError;
}

beforeAll(async () => {
  compute = await betterCompute({ clock, modules: [healthy, broken, quiet] });
  api = compute.api as unknown as typeof api;
  await compute.database.query(`INSERT INTO tenants (id, name, created_at) VALUES ('acme', 'Acme', $1)`, [clock.now()]);
  const make = (tenantId: string, permissions: string[]) =>
    createCredential(compute.database, { tenantId, name: 't', permissions, clock }).then((c) => c.token);
  root = await make('root', ['compute:*']);
  rootReader = await make('root', ['compute:metal:read']);
  acme = await make('acme', ['compute:*']);
});
afterAll(async () => {
  await compute?.close();
});

describe('doctor.findings', () => {
  it('answers every module’s findings; a provider that throws is an error finding naming it, never a 500', async () => {
    const report = await api.doctor.findings(root, { tenantId: 'root' });
    expect(report.modules).toEqual([
      {
        moduleId: 'healthy',
        findings: [{ id: 'disk-low', severity: 'warning', message: 'disk is low', details: { free: 3 } }],
      },
      {
        moduleId: 'broken',
        findings: [
          {
            id: 'doctor-provider-failed',
            severity: 'error',
            message: 'the doctor checks of module broken failed (Error)',
            details: { moduleId: 'broken', error: 'Error' },
          },
        ],
      },
    ]);
    expect(JSON.stringify(report)).not.toContain('hunter2');
  });

  it('is for root credentials holding compute:doctor:read only', async () => {
    let error = await refusal(api.doctor.findings(acme, { tenantId: 'acme' }));
    expect([error.code, error.details.reason]).toEqual(['PERMISSION_DENIED', 'root-only']);
    error = await refusal(api.doctor.findings(acme, { tenantId: 'root' }));
    expect(error.code).toBe('NOT_FOUND');
    error = await refusal(api.doctor.findings(rootReader, { tenantId: 'root' }));
    expect([error.code, error.details.permission]).toEqual(['PERMISSION_DENIED', 'compute:doctor:read']);
  });
});

describe('the core module’s API groups', () => {
  it('are in every compute and in its OpenAPI document, with their permissions', () => {
    const doc = createOpenApiDocument(compute.registry.apiGroups);
    const permissions = Object.fromEntries(
      Object.entries(doc.paths).map(([path, item]) => [path, (item.post as Record<string, unknown>)['x-permission']]),
    );
    expect(permissions).toMatchObject({
      '/v1/credentials.create': 'compute:credentials:manage',
      '/v1/credentials.list': 'compute:credentials:read',
      '/v1/credentials.revoke': 'compute:credentials:manage',
      '/v1/events.list': 'compute:events:read',
      '/v1/doctor.findings': 'compute:doctor:read',
    });
  });
});
