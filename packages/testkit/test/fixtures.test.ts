import { ComputeError } from '@better-compute/core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createFakeClock, insertNode, insertSite } from '../src';
import { rejection, type SharedDatabase, sharedDatabase } from './support/harness';

let shared: SharedDatabase;
beforeAll(async () => {
  shared = await sharedDatabase();
});
afterAll(() => shared.close());
beforeEach(() => shared.reset());

describe('insertSite', () => {
  it('inserts a site of the root tenant with a site_ id, named after its id, stamped by the clock', async () => {
    const clock = createFakeClock();
    const id = await insertSite(shared.db, {}, clock);
    expect(id).toMatch(/^site_[0-9a-z]{26}$/);
    const { rows } = await shared.db.query('SELECT * FROM sites');
    expect(rows).toEqual([{ id, tenant_id: 'root', name: id, created_at: clock.now() }]);
  });

  it('takes an id, a name and a tenant, creating the tenant when missing', async () => {
    const clock = createFakeClock();
    const id = await insertSite(shared.db, { id: 'site_fra1', name: 'fra1', tenantId: 'acme' }, clock);
    expect(id).toBe('site_fra1');
    const { rows } = await shared.db.query("SELECT id FROM tenants WHERE id = 'acme'");
    expect(rows).toEqual([{ id: 'acme' }]);
  });
});

describe('insertNode', () => {
  it('inserts a machine of the root tenant with a node_ id and empty labels', async () => {
    const clock = createFakeClock();
    const id = await insertNode(shared.db, {}, clock);
    expect(id).toMatch(/^node_[0-9a-z]{26}$/);
    const { rows } = await shared.db.query('SELECT tenant_id, kind, site_id, labels, created_at FROM nodes');
    expect(rows).toEqual([{ tenant_id: 'root', kind: 'machine', site_id: null, labels: {}, created_at: clock.now() }]);
  });

  it('stores the kind, site, pool, labels and name it is given', async () => {
    const clock = createFakeClock();
    const siteId = await insertSite(shared.db, {}, clock);
    const id = await insertNode(
      shared.db,
      { kind: 'site-agent', siteId, poolId: 'pool_a', labels: { rack: 'r12' }, name: 'agent-1' },
      clock,
    );
    const { rows } = await shared.db.query('SELECT kind, site_id, pool_id, labels, name FROM nodes WHERE id = $1', [
      id,
    ]);
    expect(rows).toEqual([
      { kind: 'site-agent', site_id: siteId, pool_id: 'pool_a', labels: { rack: 'r12' }, name: 'agent-1' },
    ]);
  });

  it('refuses labels the kernel would refuse, writing nothing', async () => {
    const err = await rejection(insertNode(shared.db, { labels: { 'Bad Key': 'x' } }, createFakeClock()));
    expect(err).toBeInstanceOf(ComputeError);
    expect((err as ComputeError).details.path).toEqual(['labels', 'Bad Key']);
    expect((await shared.db.query('SELECT id FROM nodes')).rows).toEqual([]);
  });

  it('rolls back with the transaction it is given', async () => {
    const clock = createFakeClock();
    await rejection(
      shared.db.transaction(async (tx) => {
        await insertNode(tx, {}, clock);
        throw new Error('roll back');
      }),
    );
    expect((await shared.db.query('SELECT id FROM nodes')).rows).toEqual([]);
  });
});
