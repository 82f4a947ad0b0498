import { randomBytes } from 'node:crypto';
import {
  type ApiClient,
  betterCompute,
  type Clock,
  type Compute,
  ComputeError,
  createCredential,
} from '@better-compute/core';
import { closeAgentSession, openAgentSession } from '@better-compute/core/kernel';
import { createNode } from '@better-compute/core/nodes';
import { pki } from '@better-compute/pki';
import { provisionModule } from '@better-compute/provision';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metal, type SitesApi } from '../src';

// `sites.list`: the tenant's sites, newest first with a cursor, each with its connected site agents and the agent
// holding its boot lease; another tenant's sites are never listed.

let now = new Date('2026-03-01T00:00:00Z').getTime();
const clock: Clock = { now: () => new Date(now) };
let compute: Compute;
let api: ApiClient<{ sites: SitesApi }>;
let root: string;
let acme: string;
let initech: string;

async function refusal(promise: Promise<unknown>): Promise<ComputeError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ComputeError);
  return error as ComputeError;
}

async function siteAgent(tenantId: string, siteId: string): Promise<string> {
  const node = await compute.database.transaction((tx) =>
    createNode(tx, { tenantId, kind: 'site-agent', siteId }, clock.now()),
  );
  return node.id;
}

beforeAll(async () => {
  const bareMetal = metal();
  const security = pki({ key: randomBytes(32).toString('hex') });
  compute = await betterCompute({
    clock,
    modules: [security.module, provisionModule({ modules: [bareMetal] }), bareMetal],
  });
  api = compute.api as unknown as typeof api;
  await compute.database.query(
    `INSERT INTO tenants (id, name, created_at)
       VALUES ('acme', 'Acme', $1), ('globex', 'Globex', $1), ('initech', 'Initech', $1), ('umbrella', 'Umbrella', $1)`,
    [clock.now()],
  );
  const make = (tenantId: string, permissions: string[]) =>
    createCredential(compute.database, { tenantId, name: 't', permissions, clock }).then((c) => c.token);
  root = await make('root', ['compute:*']);
  acme = await make('acme', ['compute:sites:read']);
  initech = await make('initech', ['compute:sites:read']);
});
afterAll(async () => {
  await compute?.close();
});

describe('sites.list', () => {
  it('lists the tenant’s sites newest first with their connected site agents and boot-lease holder', async () => {
    const fra = await api.sites.create(root, { tenantId: 'acme', name: 'fra1' });
    now += 1_000;
    const ams = await api.sites.create(root, { tenantId: 'acme', name: 'ams1' });
    await api.sites.create(root, { tenantId: 'globex', name: 'fra1' });

    const first = await api.sites.list(acme, { tenantId: 'acme' });
    expect(first.items).toEqual([
      { ...ams, connectedSiteAgents: 0, bootLeaseHolder: null },
      { ...fra, connectedSiteAgents: 0, bootLeaseHolder: null },
    ]);
    expect(first.nextCursor).toBeNull();

    const a1 = await siteAgent('acme', fra.id);
    const a2 = await siteAgent('acme', fra.id);
    const s1 = await compute.database.transaction((tx) =>
      openAgentSession(tx, { nodeId: a1, role: 'site', bootId: 'b1', clock }),
    );
    await compute.database.transaction((tx) => openAgentSession(tx, { nodeId: a2, role: 'site', bootId: 'b2', clock }));
    const withAgents = await api.sites.list(acme, { tenantId: 'acme' });
    expect(withAgents.items[1]).toMatchObject({ id: fra.id, connectedSiteAgents: 2, bootLeaseHolder: a1 });

    // The holder goes away: the lease moves to the other connected agent.
    await compute.database.transaction((tx) => closeAgentSession(tx, { sessionId: s1.id, clock }));
    const afterClose = await api.sites.list(acme, { tenantId: 'acme' });
    expect(afterClose.items[1]).toMatchObject({ id: fra.id, connectedSiteAgents: 1, bootLeaseHolder: a2 });

    // Silent for more than a minute: nobody is connected, nobody holds the lease.
    now += 61_000;
    const stale = await api.sites.list(acme, { tenantId: 'acme' });
    expect(stale.items[1]).toMatchObject({ id: fra.id, connectedSiteAgents: 0, bootLeaseHolder: null });
  });

  it('pages with a cursor and refuses a forged one, another tenant and a limit over 100', async () => {
    // Tenants of its own with sites of its own: the other test's sites are not on these pages.
    await api.sites.create(root, { tenantId: 'initech', name: 'fra1' });
    now += 1_000;
    await api.sites.create(root, { tenantId: 'initech', name: 'ams1' });
    await api.sites.create(root, { tenantId: 'umbrella', name: 'fra1' });

    const page = await api.sites.list(initech, { tenantId: 'initech', limit: 1 });
    expect(page.items.map((s) => s.name)).toEqual(['ams1']);
    const next = await api.sites.list(initech, { tenantId: 'initech', limit: 1, cursor: page.nextCursor as string });
    expect(next.items.map((s) => s.name)).toEqual(['fra1']);
    expect(next.nextCursor).toBeNull();
    let error = await refusal(api.sites.list(initech, { tenantId: 'initech', cursor: 'bm9wZQ' }));
    expect([error.code, error.details.path]).toEqual(['INVALID_INPUT', ['cursor']]);
    error = await refusal(api.sites.list(initech, { tenantId: 'umbrella' }));
    expect([error.code, error.details.path]).toEqual(['NOT_FOUND', ['tenantId']]);
    error = await refusal(api.sites.list(initech, { tenantId: 'initech', limit: 101 }));
    expect([error.code, error.details.path]).toEqual(['INVALID_INPUT', ['limit']]);
    const umbrella = await api.sites.list(root, { tenantId: 'umbrella' });
    expect(umbrella.items.map((s) => [s.tenantId, s.name])).toEqual([['umbrella', 'fra1']]);
  });
});
