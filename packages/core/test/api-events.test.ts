import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, createCredential, type EventsApi } from '../src/api';
import { ComputeError } from '../src/errors';
import { readEvents } from '../src/events';
import { betterCompute, type Compute } from '../src/kernel';
import { manualClock } from './support/kernel';

// The core module's `events` group: the pull form of the event stream, tenant-scoped, with subject and type filters
// whose cursor moves past what a filtered read looked at.

const clock = manualClock();
let compute: Compute;
let api: ApiClient<{ events: EventsApi }>;
let root: string;
let acme: string;

async function refusal(promise: Promise<unknown>): Promise<ComputeError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ComputeError);
  return error as ComputeError;
}

async function publish(tenantId: string, subject: string, type: string): Promise<void> {
  await compute.database.transaction((tx) => compute.context.events.publish(tx, { tenantId, subject, type, data: {} }));
}

beforeAll(async () => {
  compute = await betterCompute({ clock });
  api = compute.api as unknown as typeof api;
  await compute.database.query(
    `INSERT INTO tenants (id, name, created_at) VALUES ('acme', 'Acme', $1), ('globex', 'Globex', $1)`,
    [clock.now()],
  );
  root = (await createCredential(compute.database, { tenantId: 'root', name: 'r', permissions: ['compute:*'], clock }))
    .token;
  acme = (
    await createCredential(compute.database, {
      tenantId: 'acme',
      name: 'a',
      permissions: ['compute:events:read'],
      clock,
    })
  ).token;
  for (let i = 0; i < 5; i += 1) {
    await publish('acme', `node/n${i}`, i % 2 === 0 ? 'metal.node.deployed' : 'metal.node.failed');
    await publish('acme', `site/s${i}`, 'metal.site.created');
    await publish('globex', `node/g${i}`, 'metal.node.deployed');
  }
});
afterAll(async () => {
  await compute?.close();
});

describe('events.list', () => {
  it('reads the tenant’s events in order, page by page, and only its own', async () => {
    const first = await api.events.list(acme, { tenantId: 'acme', limit: 4 });
    expect(first.events.map((e) => e.subject)).toEqual(['node/n0', 'site/s0', 'node/n1', 'site/s1']);
    expect(first.events.every((e) => typeof e.at === 'string')).toBe(true);
    const rest = await api.events.list(acme, { tenantId: 'acme', after: first.cursor });
    expect(rest.events).toHaveLength(6);
    expect([...first.events, ...rest.events].every((e) => e.tenantId === 'acme')).toBe(true);
    const empty = await api.events.list(acme, { tenantId: 'acme', after: rest.cursor });
    expect(empty).toEqual({ events: [], cursor: rest.cursor });
  });

  it('filters on a subject prefix and on types', async () => {
    const nodes = await api.events.list(acme, { tenantId: 'acme', subjectPrefix: 'node/' });
    expect(nodes.events.map((e) => e.subject)).toEqual(['node/n0', 'node/n1', 'node/n2', 'node/n3', 'node/n4']);
    const failed = await api.events.list(acme, { tenantId: 'acme', types: ['metal.node.failed'] });
    expect(failed.events.map((e) => e.subject)).toEqual(['node/n1', 'node/n3']);
    const both = await api.events.list(acme, {
      tenantId: 'acme',
      subjectPrefix: 'node/n1',
      types: ['metal.node.failed', 'metal.site.created'],
    });
    expect(both.events.map((e) => e.subject)).toEqual(['node/n1']);
    // A prefix is literal text: LIKE wildcards match nothing.
    expect((await api.events.list(acme, { tenantId: 'acme', subjectPrefix: 'node%' })).events).toEqual([]);
  });

  it('fromEnd answers the newest events and a cursor at the end; with after or not a boolean, INVALID_INPUT', async () => {
    const newest = await api.events.list(acme, { tenantId: 'acme', fromEnd: true, limit: 3, subjectPrefix: 'node/' });
    expect(newest.events.map((e) => e.subject)).toEqual(['node/n2', 'node/n3', 'node/n4']);
    expect((await api.events.list(acme, { tenantId: 'acme', after: newest.cursor })).events).toEqual([]);
    const withAfter = await refusal(api.events.list(acme, { tenantId: 'acme', fromEnd: true, after: newest.cursor }));
    expect(withAfter).toMatchObject({ code: 'INVALID_INPUT', details: { path: ['fromEnd'] } });
    const notBoolean = await refusal(api.events.list(acme, { tenantId: 'acme', fromEnd: 'yes' as never }));
    expect(notBoolean).toMatchObject({ code: 'INVALID_INPUT', details: { path: ['fromEnd'] } });
  });

  it('moves a filtered cursor past every event it looked at, so a short page resumes after them', async () => {
    // limit 1 looks at 10 events at most: the one failed event in them, then the cursor is at the 10th.
    const page = await readEvents(compute.database, { tenantId: 'acme', limit: 1, types: ['metal.site.created'] });
    expect(page.events.map((e) => e.subject)).toEqual(['site/s0']);
    const none = await readEvents(compute.database, { tenantId: 'acme', limit: 1, subjectPrefix: 'nothing/' });
    expect(none.events).toEqual([]);
    const all = await readEvents(compute.database, { tenantId: 'acme', limit: 1000 });
    expect(none.cursor).toBe(all.events[9]?.cursor);
    // Following the cursor finds everything in the end, each once.
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 20; i += 1) {
      const next = await readEvents(compute.database, {
        tenantId: 'acme',
        limit: 1,
        subjectPrefix: 'site/',
        ...(cursor ? { after: cursor } : {}),
      });
      seen.push(...next.events.map((e) => e.subject));
      if (next.cursor === cursor) break;
      cursor = next.cursor;
    }
    expect(seen).toEqual(['site/s0', 'site/s1', 'site/s2', 'site/s3', 'site/s4']);
  });

  it('keeps a tenant to its own events; root names any tenant, or all of them', async () => {
    const error = await refusal(api.events.list(acme, { tenantId: 'globex' }));
    expect([error.code, error.details.path]).toEqual(['NOT_FOUND', ['tenantId']]);
    const denied = await refusal(api.events.list(acme, { tenantId: 'acme', allTenants: true }));
    expect(denied.code).toBe('PERMISSION_DENIED');
    const globex = await api.events.list(root, { tenantId: 'globex' });
    expect(globex.events.map((e) => e.subject)).toEqual(['node/g0', 'node/g1', 'node/g2', 'node/g3', 'node/g4']);
    const every = await api.events.list(root, { tenantId: 'root', allTenants: true, subjectPrefix: 'node/' });
    expect(every.events).toHaveLength(10);
  });

  it('refuses bad input at its path', async () => {
    for (const [input, path] of [
      [{ tenantId: 'acme', limit: 1001 }, ['limit']],
      [{ tenantId: 'acme', after: 'ev1.nope' }, ['after']],
      [{ tenantId: 'acme', types: [] }, ['types']],
      [{ tenantId: 'acme', subjectPrefix: '' }, ['subjectPrefix']],
    ] as const) {
      const error = await refusal(api.events.list(acme, input as never));
      expect([error.code, error.details.path]).toEqual(['INVALID_INPUT', path]);
    }
  });
});
