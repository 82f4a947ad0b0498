import type { SqlExecutor, StagedStart, StartWorkflowInput } from 'better-compute/core';
import { commit } from 'better-compute/core/kernel';
import { defineProfile, storeProfile } from 'better-compute/provision';
import { describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases';
import type { EngineLab } from './support/engine-lab';
import { rejectionOf } from './support/errors';
import { useEngineLab } from './support/use-engine-lab';

// `ctx.workflows.stageStart`: a start prepared for the caller's own commit (metal's lifecycle move writes the next
// phase's workflow with the machine's move in one statement). A shipped profile costs no read.

const shipped = defineProfile({ id: 'lab-shipped', version: 1, target: 'metal', steps: [{ use: 'lab.noop' }] });

// A handle that refuses every statement: staging a shipped profile's start must not need one.
const noDatabase: SqlExecutor = {
  query: () => Promise.reject(new Error('staging read the database')),
  transaction: () => Promise.reject(new Error('staging opened a transaction')),
};

describe.each(BACKENDS)('staging a workflow start on $name', ({ create }) => {
  const getLab = useEngineLab(create, { profiles: [shipped] });

  const input = (lab: EngineLab, more: Partial<StartWorkflowInput> = {}): StartWorkflowInput => ({
    tenantId: 'root',
    profileId: 'lab-shipped',
    nodeId: lab.nodeId,
    owner: 'lab.owner',
    ...more,
  });

  /** Commits the staged start with a change of the caller's own (the node's `staged` label), as metal's move does. */
  async function commitWith(lab: EngineLab, staged: StagedStart) {
    return commit(lab.compute.context, {
      changes: [
        ...staged.changes,
        {
          name: 'caller',
          sql: ({ bind, guard }) =>
            `UPDATE nodes SET labels = labels || '{"staged":"yes"}'::jsonb WHERE id = ${bind(lab.nodeId)} AND ${guard}`,
        },
      ],
      events: staged.events,
      wake: staged.wake,
    });
  }

  const stagedLabel = async (lab: EngineLab) =>
    (await lab.db.query<{ v: string | null }>("SELECT labels->>'staged' AS v FROM nodes WHERE id = $1", [lab.nodeId]))
      .rows[0]?.v ?? null;

  it("stages a shipped profile's start without a read, written with the caller's change by one statement", async () => {
    const lab = getLab();
    const staged = await lab.compute.context.workflows!.stageStart!(noDatabase, input(lab));
    expect(staged?.id).toMatch(/^wf_/);
    expect((await lab.db.query('SELECT id FROM workflows')).rows).toEqual([]);
    expect((await commitWith(lab, staged!)).status).toBe('committed');
    const wf = await lab.workflow(staged!.id);
    expect(wf).toMatchObject({ state: 'pending', profileId: 'lab-shipped', profileVersion: 1 });
    expect(await lab.eventTypes(staged!.id)).toEqual(['workflow.created']);
    expect(await stagedLabel(lab)).toBe('yes');
    // The workflow's reconciler is queued with it: settling runs the workflow to its end.
    await lab.settle();
    expect((await lab.workflow(staged!.id)).state).toBe('succeeded');
  });

  it('writes nothing when a stored profile of the same id shadows the shipped one; start then takes the stored one', async () => {
    const lab = getLab();
    await lab.db.transaction((tx) =>
      storeProfile(
        tx,
        { tenantId: 'root', profile: { ...shipped, version: 2, steps: [{ use: 'lab.noop' }, { use: 'lab.noop' }] } },
        lab.clock.now(),
      ),
    );
    const staged = await lab.compute.context.workflows!.stageStart!(noDatabase, input(lab));
    expect((await commitWith(lab, staged!)).status).toBe('stale');
    expect((await lab.db.query('SELECT id FROM workflows')).rows).toEqual([]);
    expect(await stagedLabel(lab)).toBeNull();
    const started = await lab.db.transaction((tx) => lab.compute.context.workflows!.start(tx, input(lab)));
    expect((await lab.workflow(started.id)).profileVersion).toBe(2);
  });

  it('writes nothing while another workflow is active on the node', async () => {
    const lab = getLab();
    await lab.db.transaction((tx) => lab.compute.context.workflows!.start(tx, input(lab)));
    const staged = await lab.compute.context.workflows!.stageStart!(lab.db, input(lab));
    expect((await commitWith(lab, staged!)).status).toBe('stale');
    expect((await lab.db.query('SELECT id FROM workflows')).rows).toHaveLength(1);
    expect(await stagedLabel(lab)).toBeNull();
  });

  it('leaves to start a stored profile never used (marking it used is a write of its own) and a held start', async () => {
    const lab = getLab();
    const profile = { id: 'lab-stored', version: 1, target: 'metal', steps: [{ use: 'lab.noop' }] };
    await lab.db.transaction((tx) => storeProfile(tx, { tenantId: 'root', profile }, lab.clock.now()));
    const stage = lab.compute.context.workflows!.stageStart!;
    expect(await stage(lab.db, input(lab, { profileId: 'lab-stored' }))).toBeUndefined();
    expect(await stage(lab.db, input(lab, { batchFor: async () => undefined }))).toBeUndefined();
    // Once used, it is read and staged.
    const first = await lab.db.transaction((tx) =>
      lab.compute.context.workflows!.start(tx, input(lab, { profileId: 'lab-stored' })),
    );
    await lab.settle();
    expect((await lab.workflow(first.id)).state).toBe('succeeded');
    const staged = await stage(lab.db, input(lab, { profileId: 'lab-stored' }));
    expect((await commitWith(lab, staged!)).status).toBe('committed');
    expect((await lab.workflow(staged!.id)).profileId).toBe('lab-stored');
  });

  it('refuses an unknown profile with NOT_FOUND and bad input with INVALID_INPUT at its path, as start does', async () => {
    const lab = getLab();
    const stage = lab.compute.context.workflows!.stageStart!;
    const unknown = await rejectionOf(() => stage(lab.db, input(lab, { profileId: 'lab-nothing' })));
    expect(unknown).toMatchObject({ code: 'NOT_FOUND', details: { path: ['profileId'] } });
    const bad = await rejectionOf(() => stage(lab.db, input(lab, { tenantId: '' })));
    expect(bad).toMatchObject({ code: 'INVALID_INPUT', details: { path: ['tenantId'] } });
  });
});
