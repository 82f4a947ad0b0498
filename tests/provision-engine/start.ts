import { storeProfile } from 'better-compute/provision';
import { expect, it } from 'vitest';
import { type EngineLab, lab as labRecord } from '../support/engine-lab';
import { rejectionOf } from '../support/errors';

export function startScenarios(getLab: () => EngineLab) {
  it('expands main, on-failure and cleanup rows in the order they run', async () => {
    const lab = getLab();
    const id = await lab.start({
      id: 'lab-rows',
      steps: [
        { use: 'lab.mount' },
        { use: 'lab.noop', onFailure: { use: 'lab.noop', with: { tag: 'handler' } } },
        { use: 'lab.mount' },
      ],
      acceptance: [{ use: 'lab.noop', with: { tag: 'acceptance' } }],
      cleanup: [{ use: 'lab.noop', with: { tag: 'profile-cleanup' } }],
    });
    const wf = await lab.workflow(id);
    expect(wf.steps.map((s) => s.stepId)).toEqual([
      'main.1',
      'main.2',
      'main.3',
      'main.4',
      'main.2.on-failure',
      'main.3.cleanup.1',
      'main.3.cleanup.2',
      'main.1.cleanup.1',
      'main.1.cleanup.2',
      'cleanup.1',
    ]);
    expect(wf.steps.map((s) => s.phase)).toEqual([
      'main',
      'main',
      'main',
      'main',
      'on-failure',
      'cleanup',
      'cleanup',
      'cleanup',
      'cleanup',
      'cleanup',
    ]);
    expect(wf).toMatchObject({ state: 'pending', profileId: 'lab-rows', profileVersion: 1 });
    expect(wf.id).toMatch(/^wf_/);
  });

  it('resolves a driver operation to one driver.invoke step carrying the bound driver', async () => {
    const lab = getLab();
    const id = await lab.start({
      id: 'lab-driver',
      drivers: { power: { name: 'redfish', endpoint: 'bmc-1' } },
      steps: [{ use: 'power.setPower', on: 'site', with: { action: 'cycle' } }],
    });
    await lab.settle();
    const wf = await lab.workflow(id);
    expect(wf.state).toBe('succeeded');
    expect(wf.steps[0]).toMatchObject({ action: 'power.setPower', runsOn: 'site' });
    const command = await lab.compute.commands.get(lab.db, wf.steps[0]?.commandId as string);
    expect(command).toMatchObject({
      kind: 'driver.invoke',
      nodeId: lab.siteAgent.nodeId,
      targetNodeId: lab.nodeId,
      payload: {
        operation: 'power.setPower',
        driver: { name: 'redfish', endpoint: 'bmc-1' },
        input: { action: 'cycle' },
      },
    });
  });

  it('uses fallback when use does not resolve', async () => {
    const lab = getLab();
    const id = await lab.start({ id: 'lab-fallback', steps: [{ use: 'acme.missing', fallback: 'lab.noop' }] });
    expect((await lab.workflow(id)).steps[0]?.action).toBe('lab.noop');
  });

  it('refuses an on: that is neither the step runsOn nor one of its relays', async () => {
    const error = await rejectionOf(() =>
      getLab().start({ id: 'lab-on', steps: [{ use: 'lab.noop', on: 'ramdisk' }] }),
    );
    expect(error).toMatchObject({ code: 'INVALID_INPUT', details: { path: ['steps', 0, 'use'] } });
  });

  it('accepts on: naming a relay of a control-plane step', async () => {
    const lab = getLab();
    const id = await lab.start({ id: 'lab-relay-on', steps: [{ use: 'lab.relay', on: 'site' }] });
    expect((await lab.workflow(id)).steps[0]).toMatchObject({ action: 'lab.relay', runsOn: 'control-plane' });
  });

  it('lists every unresolved use and rejected with, each with its path, as INVALID_INPUT', async () => {
    const error = await rejectionOf(() =>
      getLab().start({
        id: 'lab-issues',
        steps: [
          { use: 'acme.missing' },
          { use: 'lab.inspect', with: { port: 0 } },
          { use: 'power.setPower', on: 'site' },
        ],
        cleanup: [{ use: 'lab.noop', with: { tag: 7 } }],
      }),
    );
    expect(error).toMatchObject({ code: 'INVALID_INPUT', details: { path: ['steps', 0, 'use'] } });
    const paths = (error as { details: { issues: { path: unknown[] }[] } }).details.issues.map((i) => i.path);
    expect(paths).toEqual([
      ['steps', 0, 'use'],
      ['steps', 1, 'with', 'port'],
      ['steps', 2, 'use'],
      ['cleanup', 0, 'with', 'tag'],
    ]);
  });

  it('refuses a profile that expands to more than 512 steps', async () => {
    const steps = Array.from({ length: 200 }, () => ({ use: 'lab.mount' }));
    const error = await rejectionOf(() => getLab().start({ id: 'lab-big', steps }));
    expect(error).toMatchObject({ code: 'INVALID_INPUT', details: { path: ['steps'] } });
  });

  it('refuses a second active workflow on a node with CONFLICT, and allows one once the first ended', async () => {
    const lab = getLab();
    await lab.start({ id: 'lab-one', steps: [{ use: 'lab.noop' }] });
    const error = await rejectionOf(() => lab.start({ id: 'lab-two', steps: [{ use: 'lab.noop' }] }));
    expect(error).toMatchObject({ code: 'CONFLICT', details: { path: ['nodeId'] } });
    await lab.settle();
    await expect(lab.start({ id: 'lab-three', steps: [{ use: 'lab.noop' }] })).resolves.toMatch(/^wf_/);
  });

  it('answers NOT_FOUND for an unknown profile, an unknown node and a node of another tenant', async () => {
    const lab = getLab();
    const start = (input: Record<string, unknown>) =>
      rejectionOf(() =>
        lab.db.transaction((tx) =>
          lab.compute.context.workflows!.start(tx, { tenantId: 'root', profileId: 'lab-none', ...input }),
        ),
      );
    expect(await start({ nodeId: lab.nodeId })).toMatchObject({ code: 'NOT_FOUND', details: { path: ['profileId'] } });
    await lab.start({ id: 'lab-nf', steps: [{ use: 'lab.noop' }] });
    await lab.settle();
    expect(await start({ profileId: 'lab-nf', nodeId: 'node_missing' })).toMatchObject({
      code: 'NOT_FOUND',
      details: { path: ['nodeId'] },
    });
    expect(await start({ tenantId: 'acme', profileId: 'lab-nf', nodeId: lab.nodeId })).toMatchObject({
      code: 'NOT_FOUND',
      details: { path: ['nodeId'] },
    });
  });

  it('snapshots the profile document, records every command kind it can send, and keeps the owner', async () => {
    const lab = getLab();
    const id = await lab.start(
      {
        id: 'lab-kinds',
        drivers: { power: { name: 'ipmi' } },
        steps: [{ use: 'lab.ping' }, { use: 'lab.relay' }, { use: 'power.setPower', on: 'site' }, { use: 'lab.noop' }],
      },
      { owner: 'lab.owner' },
    );
    const { rows } = await lab.db.query<{ command_kinds: string[]; owner: string; document: { id: string } }>(
      'SELECT command_kinds, owner, document FROM workflows WHERE id = $1',
      [id],
    );
    expect(rows[0]).toMatchObject({
      command_kinds: ['driver.invoke', 'lab.ping', 'lab.unregistered', 'lab.wipe'],
      owner: 'lab.owner',
      document: { id: 'lab-kinds' },
    });
  });

  it('queues the owner under the workflow key when the workflow ends', async () => {
    const lab = getLab();
    await lab.start({ id: 'lab-owner', steps: [{ use: 'lab.noop' }] }, { owner: 'lab.owner' });
    await lab.settle();
    expect(labRecord.owner).toEqual([lab.nodeId]);
  });

  it('refuses an owner no reconciler is registered for with INVALID_INPUT at owner, starting nothing', async () => {
    const lab = getLab();
    const error = await rejectionOf(() =>
      lab.start({ id: 'lab-typo', steps: [{ use: 'lab.noop' }] }, { owner: 'lab.ownr' }),
    );
    expect(error).toMatchObject({ code: 'INVALID_INPUT', details: { path: ['owner'] } });
    expect((error as Error).message).toContain("'lab.ownr'");
    const { rows } = await lab.db.query('SELECT 1 FROM workflows WHERE node_id = $1', [lab.nodeId]);
    expect(rows).toHaveLength(0);
  });

  it("starts in the caller's transaction: a rollback leaves no workflow, no rows and no event", async () => {
    const lab = getLab();
    await rejectionOf(() =>
      lab.db.transaction(async (tx) => {
        await storeProfile(
          tx,
          { tenantId: 'root', profile: { id: 'lab-rb', version: 1, target: 'metal', steps: [{ use: 'lab.noop' }] } },
          lab.clock.now(),
        );
        await lab.compute.context.workflows!.start(tx, { tenantId: 'root', profileId: 'lab-rb', nodeId: lab.nodeId });
        throw new Error('caller gives up');
      }),
    );
    const counts = await lab.db.query<{ workflows: number; steps: number; events: number }>(
      'SELECT (SELECT count(*) FROM workflows)::int AS workflows, (SELECT count(*) FROM workflow_steps)::int AS steps, (SELECT count(*) FROM events)::int AS events',
    );
    expect(counts.rows[0]).toEqual({ workflows: 0, steps: 0, events: 0 });
  });
}
