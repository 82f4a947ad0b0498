import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  bumpNodeGeneration,
  createNode,
  getNode,
  joinNodeSql,
  nodeColumnSql,
  nodeHasLabelsSql,
  setNodeFacts,
  setNodeHostSection,
  setNodeLabels,
  setNodeObservedGeneration,
  setNodeProvisionState,
} from '../../src/nodes';
import { isSqlError, type SqlDatabase } from '../../src/sql';
import type { ScratchDatabase } from '../support/databases';
import { manualClock, migrateCore } from '../support/kernel';

/** The node repository (`@better-compute/core/nodes`), run once per backend. */
export function defineNodeRepositoryConformance(create: () => Promise<ScratchDatabase>): void {
  let scratch: ScratchDatabase;
  let db: SqlDatabase;
  const clock = manualClock();

  beforeAll(async () => {
    scratch = await create();
    db = scratch.db;
    await migrateCore(db, clock);
  });
  afterAll(async () => {
    await scratch?.drop();
  });
  beforeEach(async () => {
    await db.query('TRUNCATE nodes, sites, tenants CASCADE');
    for (const id of ['acme', 'globex']) {
      await db.query('INSERT INTO tenants (id, name, created_at) VALUES ($1, $1, $2)', [id, clock.now()]);
    }
    await db.query("INSERT INTO sites (id, tenant_id, name, created_at) VALUES ('site_fra', 'acme', 'fra', $1)", [
      clock.now(),
    ]);
  });

  describe('node repository', () => {
    it('creates a node with the column defaults and reads it back as the schema row type', async () => {
      const now = clock.now();
      const node = await createNode(
        db,
        { tenantId: 'acme', kind: 'machine', siteId: 'site_fra', poolId: 'gpu', provisionState: 'enrolling' },
        now,
      );
      expect(node).toEqual({
        id: expect.stringMatching(/^node_[0-9a-z]{26}$/),
        tenantId: 'acme',
        siteId: 'site_fra',
        poolId: 'gpu',
        kind: 'machine',
        name: null,
        provisionState: 'enrolling',
        labels: {},
        facts: {},
        spec: {},
        generation: 1,
        observedGeneration: 0,
        createdAt: now,
        updatedAt: now,
      });
      expect(await getNode(db, node.id)).toEqual(node);
      const { rows } = await db.query('SELECT provision_state, pool_id FROM nodes WHERE id = $1', [node.id]);
      expect(rows).toEqual([{ provision_state: 'enrolling', pool_id: 'gpu' }]);
    });

    it('takes an id, a name and labels', async () => {
      const node = await createNode(
        db,
        { tenantId: 'acme', kind: 'site-agent', id: 'node_a', name: 'agent-1', labels: { rack: 'r12' } },
        clock.now(),
      );
      expect(node).toMatchObject({ id: 'node_a', kind: 'site-agent', name: 'agent-1', labels: { rack: 'r12' } });
    });

    it('refuses bad input with INVALID_INPUT at the field, writing nothing', async () => {
      const base = { tenantId: 'acme', kind: 'machine' };
      for (const [input, path] of [
        [{ ...base, tenantId: '' }, ['tenantId']],
        [{ ...base, kind: 7 }, ['kind']],
        [{ ...base, id: 'node_\u0000' }, ['id']],
        [{ ...base, siteId: 'x'.repeat(513) }, ['siteId']],
        [{ ...base, name: 'a\ud800' }, ['name']],
        [{ ...base, provisionState: '' }, ['provisionState']],
        [{ ...base, labels: { 'Bad Key': 'x' } }, ['labels', 'Bad Key']],
        [{ ...base, labels: { rack: 'r\u0000' } }, ['labels', 'rack']],
      ] as const) {
        await expect(createNode(db, input as never, clock.now())).rejects.toMatchObject({
          code: 'INVALID_INPUT',
          details: { path },
        });
      }
      await expect(createNode(db, base, new Date('nope'))).rejects.toMatchObject({ details: { path: ['now'] } });
      expect((await db.query('SELECT id FROM nodes')).rowCount).toBe(0);
    });

    it('leaves a missing tenant or a taken id to the database', async () => {
      const missing = await createNode(db, { tenantId: 'nobody', kind: 'machine' }, clock.now()).catch((e) => e);
      expect(isSqlError(missing, 'foreign-key-violation')).toBe(true);
      await createNode(db, { tenantId: 'acme', kind: 'machine', id: 'node_x' }, clock.now());
      const taken = await createNode(db, { tenantId: 'acme', kind: 'machine', id: 'node_x' }, clock.now()).catch(
        (e) => e,
      );
      expect(isSqlError(taken, 'unique-violation')).toBe(true);
    });

    it('reads within a tenant, and locks the row for the rest of a transaction', async () => {
      const { id } = await createNode(db, { tenantId: 'acme', kind: 'machine' }, clock.now());
      expect(await getNode(db, id, { tenantId: 'acme' })).toMatchObject({ id });
      expect(await getNode(db, id, { tenantId: 'globex' })).toBeUndefined();
      expect(await getNode(db, 'node_missing')).toBeUndefined();
      const locked = await db.transaction((tx) => getNode(tx, id, { forUpdate: true }));
      expect(locked).toMatchObject({ id });
      await expect(getNode(db, 'node_\u0000')).rejects.toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['nodeId'] },
      });
    });

    it('sets labels and the provision state, stamping updatedAt and leaving the generation alone', async () => {
      const { id } = await createNode(db, { tenantId: 'acme', kind: 'machine' }, clock.now());
      clock.advance(1_000);
      const labelled = await setNodeLabels(db, id, { rack: 'r12', gpu: 'h100' }, clock.now());
      expect(labelled).toMatchObject({ labels: { rack: 'r12', gpu: 'h100' }, generation: 1, updatedAt: clock.now() });
      expect((await setNodeLabels(db, id, {}, clock.now()))?.labels).toEqual({});
      await expect(setNodeLabels(db, id, { 'Bad Key': 'x' }, clock.now())).rejects.toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['labels', 'Bad Key'] },
      });
      expect(await setNodeProvisionState(db, id, 'available', clock.now())).toMatchObject({
        provisionState: 'available',
      });
      expect(await setNodeProvisionState(db, id, null, clock.now())).toMatchObject({ provisionState: null });
      await expect(setNodeProvisionState(db, id, '\u0000', clock.now())).rejects.toMatchObject({
        details: { path: ['provisionState'] },
      });
      expect(await setNodeLabels(db, 'node_missing', {}, clock.now())).toBeUndefined();
    });

    it('sets facts: a JSON object, returned by getNode, leaving labels, spec and the generation alone', async () => {
      const { id } = await createNode(db, { tenantId: 'acme', kind: 'machine', labels: { rack: 'r12' } }, clock.now());
      clock.advance(1_000);
      const facts = { gpus: [{ model: 'H100', memoryMiB: 81_559 }], cpu: { cores: 96 }, nvswitch: false, bmc: null };
      const set = await setNodeFacts(db, id, facts, clock.now());
      expect(set).toMatchObject({ facts, labels: { rack: 'r12' }, spec: {}, generation: 1, updatedAt: clock.now() });
      expect((await getNode(db, id))?.facts).toEqual(facts);
      expect((await setNodeFacts(db, id, {}, clock.now()))?.facts).toEqual({});
      expect(await setNodeFacts(db, 'node_missing', facts, clock.now())).toBeUndefined();
    });

    it('refuses facts that are not a storable JSON object with INVALID_INPUT at the path, writing nothing', async () => {
      const { id } = await createNode(db, { tenantId: 'acme', kind: 'machine' }, clock.now());
      await setNodeFacts(db, id, { kept: true }, clock.now());
      for (const [facts, path] of [
        [null, ['facts']],
        [[1, 2], ['facts']],
        ['gpus', ['facts']],
        [new Date(), ['facts']],
        [{ gpus: [{ model: 'H\u0000' }] }, ['facts', 'gpus', 0, 'model']],
        [{ 'a\ud800': 1 }, ['facts', 'a\ud800']],
        [{ seen: new Date() }, ['facts', 'seen']],
        [{ count: Number.NaN }, ['facts', 'count']],
        [{ missing: undefined }, ['facts', 'missing']],
      ] as const) {
        await expect(setNodeFacts(db, id, facts as never, clock.now())).rejects.toMatchObject({
          code: 'INVALID_INPUT',
          details: { path },
        });
      }
      await expect(setNodeFacts(db, id, {}, new Date('nope'))).rejects.toMatchObject({ details: { path: ['now'] } });
      await expect(setNodeFacts(db, '', {}, clock.now())).rejects.toMatchObject({ details: { path: ['nodeId'] } });
      expect((await getNode(db, id))?.facts).toEqual({ kept: true });
    });

    it('gives the SQL of its columns, a join and a labels guard for statements that read a node beside other rows', async () => {
      const { id } = await createNode(
        db,
        { tenantId: 'acme', kind: 'machine', siteId: 'site_fra', labels: { rack: 'r12' } },
        clock.now(),
      );
      const joined = await db.query(
        `SELECT ${nodeColumnSql('siteId', 'n')} AS site, ${nodeColumnSql('labels', 'n')} AS labels
         FROM (VALUES ($1::text), ('node_missing')) AS w(node_id) ${joinNodeSql('n', 'w.node_id')} ORDER BY w.node_id`,
        [id],
      );
      expect(joined.rows).toEqual([
        { site: 'site_fra', labels: { rack: 'r12' } },
        { site: null, labels: null },
      ]);
      const guard = (labels: object) =>
        db.query<{ held: boolean }>(`SELECT ${nodeHasLabelsSql('$1', '$2::jsonb')} AS held`, [
          id,
          JSON.stringify(labels),
        ]);
      expect((await guard({ rack: 'r12' })).rows).toEqual([{ held: true }]);
      expect((await guard({ rack: 'r13' })).rows).toEqual([{ held: false }]);
      expect(() => nodeColumnSql('nope' as never)).toThrow(TypeError);
      expect(() => joinNodeSql('n; DROP TABLE nodes', 'w.node_id')).toThrow(TypeError);
    });

    it('bumps the generation, records the observed generation, and sets the host section with a bump', async () => {
      const { id } = await createNode(db, { tenantId: 'acme', kind: 'machine' }, clock.now());
      expect(await bumpNodeGeneration(db, id, clock.now())).toMatchObject({ generation: 2, observedGeneration: 0 });
      expect(await setNodeObservedGeneration(db, id, 2, clock.now())).toMatchObject({ observedGeneration: 2 });
      for (const bad of [-1, 1.5, Number.NaN, '2']) {
        await expect(setNodeObservedGeneration(db, id, bad as number, clock.now())).rejects.toMatchObject({
          code: 'INVALID_INPUT',
          details: { path: ['observedGeneration'] },
        });
      }
      await db.query(`UPDATE nodes SET spec = '{"os": {"image": "noble"}}' WHERE id = $1`, [id]);
      const host = { units: [{ name: 'mig', settings: { profile: '1g.10gb' } }] };
      expect(await setNodeHostSection(db, id, host, clock.now())).toMatchObject({
        spec: { os: { image: 'noble' }, host },
        generation: 3,
      });
      // A spec that is not an object starts over as one.
      await db.query(`UPDATE nodes SET spec = '[]' WHERE id = $1`, [id]);
      expect((await setNodeHostSection(db, id, host, clock.now()))?.spec).toEqual({ host });
      await expect(setNodeHostSection(db, id, { units: [{ name: 'a\u0000' }] }, clock.now())).rejects.toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['host', 'units', 0, 'name'] },
      });
      expect(await bumpNodeGeneration(db, 'node_missing', clock.now())).toBeUndefined();
      expect(await setNodeHostSection(db, 'node_missing', host, clock.now())).toBeUndefined();
    });
  });
}
