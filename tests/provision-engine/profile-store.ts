import { betterCompute } from 'better-compute/core';
import { BUILTIN_TENANT, defineProfile, findProfile, provisionModule, storeProfile } from 'better-compute/provision';
import { insertNode } from 'better-compute/testkit';
import { expect, it } from 'vitest';
import type { EngineLab } from '../support/engine-lab';
import { labModule, labSteps } from '../support/engine-lab';
import { rejectionOf } from '../support/errors';

const shipped = defineProfile({
  id: 'lab-shipped',
  version: 1,
  target: 'metal',
  steps: [{ use: 'lab.noop', with: { tag: 'shipped' } }],
});

function stored(tag: string, version = 1) {
  return { id: 'lab-shipped', version, target: 'metal' as const, steps: [{ use: 'lab.noop', with: { tag } }] };
}

export function profileStoreScenarios(getLab: () => EngineLab) {
  const engineOf = () => provisionModule({ steps: labSteps, profiles: [shipped] }).engine;

  it('finds a shipped profile for any tenant, listed under the tenant builtin', async () => {
    const found = await findProfile(getLab().db, engineOf().profiles, 'acme', 'lab-shipped');
    expect(found).toMatchObject({ tenantId: BUILTIN_TENANT, profile: { id: 'lab-shipped', version: 1 } });
  });

  it("prefers the tenant's own stored profile, then a public stored one, then a shipped one", async () => {
    const { db, clock } = getLab();
    const profiles = engineOf().profiles;
    await db.transaction((tx) =>
      storeProfile(tx, { tenantId: 'globex', profile: stored('public'), public: true }, clock.now()),
    );
    expect((await findProfile(db, profiles, 'acme', 'lab-shipped'))?.tenantId).toBe('globex');
    await db.transaction((tx) => storeProfile(tx, { tenantId: 'acme', profile: stored('own') }, clock.now()));
    const own = await findProfile(db, profiles, 'acme', 'lab-shipped');
    expect(own).toMatchObject({ tenantId: 'acme', profile: { steps: [{ with: { tag: 'own' } }] } });
  });

  it("does not show another tenant's private profile", async () => {
    const { db, clock } = getLab();
    await db.transaction((tx) =>
      storeProfile(tx, { tenantId: 'globex', profile: { ...stored('x'), id: 'lab-private' } }, clock.now()),
    );
    expect(await findProfile(db, engineOf().profiles, 'acme', 'lab-private')).toBeUndefined();
  });

  it('takes the latest version when none is pinned', async () => {
    const { db, clock } = getLab();
    await db.transaction(async (tx) => {
      await storeProfile(tx, { tenantId: 'root', profile: stored('v2', 2) }, clock.now());
      await storeProfile(tx, { tenantId: 'root', profile: stored('v3', 3) }, clock.now());
    });
    expect((await findProfile(db, engineOf().profiles, 'root', 'lab-shipped'))?.profile.version).toBe(3);
  });

  it('replaces a stored version until a workflow used it, then refuses with INVALID_STATE', async () => {
    const lab = getLab();
    const store = (tag: string) =>
      lab.db.transaction((tx) =>
        storeProfile(tx, { tenantId: 'root', profile: { ...stored(tag), id: 'lab-imm' } }, lab.clock.now()),
      );
    await store('first');
    await store('second');
    await lab.start({ id: 'lab-imm', steps: [{ use: 'lab.noop', with: { tag: 'second' } }] });
    const error = await rejectionOf(() => store('third'));
    expect(error).toMatchObject({
      code: 'INVALID_STATE',
      details: { reason: 'profile-version-used', path: ['profile', 'version'] },
    });
  });

  it('refuses to store under the builtin tenant', async () => {
    const { db, clock } = getLab();
    const error = await rejectionOf(() =>
      db.transaction((tx) => storeProfile(tx, { tenantId: 'builtin', profile: stored('x') }, clock.now())),
    );
    expect(error).toMatchObject({ code: 'INVALID_INPUT', details: { path: ['tenantId'] } });
  });

  it('refuses a stored document that is not a valid profile with INVALID_INPUT and its path', async () => {
    const { db, clock } = getLab();
    const profile = { ...stored('x'), steps: [{ use: 'lab.noop', timeout: 'soon' }] };
    const error = await rejectionOf(() =>
      db.transaction((tx) => storeProfile(tx, { tenantId: 'root', profile }, clock.now())),
    );
    expect(error).toMatchObject({ code: 'INVALID_INPUT', details: { path: ['steps', 0, 'timeout'] } });
  });

  it('starts a workflow from a profile shipped by provision or borrowed from a module', async () => {
    const lab = getLab();
    const plugin = { id: 'lab-plugin', profiles: [defineProfile({ ...shipped, id: 'lab-borrowed' })] };
    const provision = provisionModule({ steps: labSteps, profiles: [shipped], modules: [plugin] });
    const compute = await betterCompute({
      database: lab.db,
      clock: lab.clock,
      modules: [labModule, provision],
      plugins: [plugin],
    });
    const nodeId = await insertNode(lab.db, {}, lab.clock);
    const other = await insertNode(lab.db, {}, lab.clock);
    await lab.db.transaction(async (tx) => {
      await compute.context.workflows!.start(tx, { tenantId: 'root', profileId: 'lab-shipped', nodeId });
      await compute.context.workflows!.start(tx, { tenantId: 'root', profileId: 'lab-borrowed', nodeId: other });
    });
    const { rows } = await lab.db.query<{ profile_tenant_id: string }>('SELECT profile_tenant_id FROM workflows');
    expect(rows.map((r) => r.profile_tenant_id)).toEqual(['builtin', 'builtin']);
    await compute.close();
  });
}
