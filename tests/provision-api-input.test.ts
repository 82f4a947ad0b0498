import type { ApiClient } from 'better-compute/core';
import { abortWorkflow, getWorkflow, type ProvisionApi, storeProfile } from 'better-compute/provision';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { apiError, post, provisionApiOf, tokenFor } from './support/api';
import { BACKENDS, type ScratchDatabase } from './support/databases';
import { createEngineLab, type EngineLab } from './support/engine-lab';

// Input that passes a loose check but that PostgreSQL cannot hold: a NUL or a lone surrogate in any id or text, and
// whole numbers beyond an int4 column. Each must be the caller's INVALID_INPUT at its path, never an INTERNAL 500.

const INT4_MAX = 2_147_483_647;

/** A cursor as the listings encode theirs, with a key the server never handed out. */
const forgedCursor = (listing: string, key: unknown[]) =>
  Buffer.from(JSON.stringify({ l: listing, k: key }), 'utf8').toString('base64url');

describe.each(BACKENDS)('provision input PostgreSQL cannot hold, on $name', ({ create }) => {
  let scratch: ScratchDatabase;
  let lab: EngineLab;
  let api: ApiClient<ProvisionApi>;
  let root: string;

  beforeAll(async () => {
    scratch = await create();
    lab = await createEngineLab(scratch.db);
    api = provisionApiOf(lab.compute);
  });
  afterAll(async () => {
    await lab?.close();
    await scratch?.drop();
  });
  beforeEach(async () => {
    await lab.reset();
    root = await tokenFor(lab.db, lab.clock, 'root', ['compute:*']);
  });

  const profile = (version: number) => ({ id: 'lab-one', version, target: 'metal', steps: [{ use: 'lab.noop' }] });
  const startOne = () =>
    lab.db.transaction(async (tx) => {
      await storeProfile(tx, { tenantId: 'root', profile: profile(1) }, lab.clock.now());
      return (
        await lab.compute.context.workflows!.start(tx, { tenantId: 'root', profileId: 'lab-one', nodeId: lab.nodeId })
      ).id;
    });

  it('answers a NUL or a lone surrogate in any id over HTTP with 400 INVALID_INPUT at that id', async () => {
    const workflowId = await startOne();
    const ids = { tenantId: 'root', nodeId: lab.nodeId, workflowId };
    const cases: [string, Record<string, unknown>, string][] = [
      ['profiles.list', { tenantId: 'a\u0000b' }, 'tenantId'],
      ['profiles.get', { tenantId: 'root', profileId: 'lab-\u0000' }, 'profileId'],
      ['profiles.render', { tenantId: 'root', profileId: 'lab-one', nodeId: `${lab.nodeId}\u0000` }, 'nodeId'],
      ['workflows.get', { ...ids, nodeId: 'n\ud800' }, 'nodeId'],
      ['workflows.get', { ...ids, workflowId: `${workflowId}\u0000` }, 'workflowId'],
      ['workflows.abort', { ...ids, reason: 'oops\u0000' }, 'reason'],
      ['workflows.retry', { ...ids, fromStep: 'main.\u0000' }, 'fromStep'],
    ];
    for (const [method, body, field] of cases) {
      const response = await post(lab.compute, method, root, body);
      expect({ method, status: response.status, body: await response.json() }).toMatchObject({
        method,
        status: 400,
        body: { code: 'INVALID_INPUT', details: { path: [field] } },
      });
    }
  });

  it('refuses a profile version beyond the integer column at version, and still takes the largest it holds', async () => {
    for (const version of [INT4_MAX + 1, Number.MAX_SAFE_INTEGER]) {
      const response = await post(lab.compute, 'profiles.create', root, {
        tenantId: 'root',
        profile: profile(version),
      });
      expect({ status: response.status, body: await response.json() }).toMatchObject({
        status: 400,
        body: { code: 'INVALID_INPUT', details: { path: ['version'] } },
      });
    }
    const stored = await api.profiles.create(root, { tenantId: 'root', profile: profile(INT4_MAX) });
    expect(stored.profile.version).toBe(INT4_MAX);
    expect((await api.profiles.get(root, { tenantId: 'root', profileId: 'lab-one' })).profile.version).toBe(INT4_MAX);
  });

  it('refuses a forged cursor whose key the columns cannot hold as INVALID_INPUT at cursor', async () => {
    const base = { tenantId: 'root', nodeId: lab.nodeId };
    const profileCursors = [
      forgedCursor('profiles', ['lab-one', 2 ** 40, 0, 'root']),
      forgedCursor('profiles', ['lab-one', 1, 2 ** 40, 'root']),
      forgedCursor('profiles', ['lab-\u0000', 1, 0, 'root']),
    ];
    for (const cursor of profileCursors) {
      expect(await apiError(api.profiles.list(root, { tenantId: 'root', cursor }))).toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['cursor'] },
      });
    }
    const workflowCursors = [
      forgedCursor('workflows', ['not a time', 'wf_1']),
      forgedCursor('workflows', ['2026-02-30T00:00:00.000000Z', 'wf_1']),
      forgedCursor('workflows', ['2026-03-01T00:00:00.000000Z', 'wf_\u0000']),
    ];
    for (const cursor of workflowCursors) {
      expect(await apiError(api.workflows.list(root, { ...base, cursor }))).toMatchObject({
        code: 'INVALID_INPUT',
        details: { path: ['cursor'] },
      });
    }
  });

  it('start refuses ids it cannot store and a version beyond the integer column, at their paths', async () => {
    const start = (input: Record<string, unknown>) =>
      lab.db.transaction((tx) =>
        lab.compute.context.workflows!.start(tx, { tenantId: 'root', profileId: 'lab-one', ...input } as never),
      );
    await lab.db.transaction((tx) => storeProfile(tx, { tenantId: 'root', profile: profile(1) }, lab.clock.now()));
    const cases: [Record<string, unknown>, string][] = [
      [{ tenantId: 'ro\u0000ot', nodeId: lab.nodeId }, 'tenantId'],
      [{ profileId: 'lab-\u0000', nodeId: lab.nodeId }, 'profileId'],
      [{ nodeId: `${lab.nodeId}\u0000` }, 'nodeId'],
      [{ instanceId: 'i-\ud800' }, 'instanceId'],
      [{ nodeId: lab.nodeId, owner: 'lab.\u0000' }, 'owner'],
      [{ nodeId: lab.nodeId, batchId: 'b\u0000' }, 'batchId'],
      [{ nodeId: lab.nodeId, profileVersion: INT4_MAX + 1 }, 'profileVersion'],
    ];
    for (const [input, field] of cases) {
      expect(await apiError(start(input)), field).toMatchObject({ code: 'INVALID_INPUT', details: { path: [field] } });
    }
  });

  it('the verbs and storeProfile refuse ids and text they cannot store, at their paths', async () => {
    const workflowId = await startOne();
    const ctx = lab.compute.context;
    expect(await apiError(abortWorkflow(ctx, { workflowId: `${workflowId}\u0000` }))).toMatchObject({
      code: 'INVALID_INPUT',
      details: { path: ['workflowId'] },
    });
    expect(await apiError(getWorkflow(lab.db, { workflowId: `${workflowId}\ud800` }))).toMatchObject({
      code: 'INVALID_INPUT',
      details: { path: ['workflowId'] },
    });
    expect(await apiError(abortWorkflow(ctx, { workflowId, reason: 'why\u0000' }))).toMatchObject({
      code: 'INVALID_INPUT',
      details: { path: ['reason'] },
    });
    const store = lab.db.transaction((tx) =>
      storeProfile(tx, { tenantId: 'ro\u0000ot', profile: profile(2) }, lab.clock.now()),
    );
    expect(await apiError(store)).toMatchObject({ code: 'INVALID_INPUT', details: { path: ['tenantId'] } });
  });
});
