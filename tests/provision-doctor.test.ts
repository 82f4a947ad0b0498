import type { Finding } from 'better-compute/core';
import { DOCTOR_LIMITS, provisionFindings } from 'better-compute/provision';
import { insertNode } from 'better-compute/testkit';
import { beforeEach, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases';
import type { EngineLab } from './support/engine-lab';
import { useEngineLab } from './support/use-engine-lab';

// `better-compute doctor`'s provision findings (workflows.md): workflows-stuck and workflows-failed, timed by ctx.clock.

const MINUTE = 60_000;

describe.each(BACKENDS)('provision doctor findings on $name', ({ create }) => {
  const getLab = useEngineLab(create);
  let lab: EngineLab;
  const findings = (): Promise<readonly Finding[]> => provisionFindings(lab.compute.context);

  beforeEach(async () => {
    lab = getLab();
  });

  it('is the module’s findings provider', () => {
    expect(lab.provision.findings).toBe(provisionFindings);
  });

  it('reports nothing on a healthy system: succeeded workflows and one waiting within its deadline', async () => {
    expect(await findings()).toEqual([]);
    await lab.start({ id: 'doc-ok', steps: [{ use: 'lab.noop' }] });
    await lab.settle();
    const other = await insertNode(lab.db, { siteId: lab.siteId }, lab.clock);
    await lab.start({ id: 'doc-waiting', steps: [{ use: 'lab.ping' }] }, { nodeId: other });
    // One pass: the command is sent and the step waits; nobody answers.
    await lab.compute.runDueWork();
    lab.clock.advance(4 * MINUTE);
    expect(await findings()).toEqual([]);
  });

  it('reports workflows-stuck for a step more than 5 minutes past its deadline with no worker running', async () => {
    const id = await lab.start({ id: 'doc-stuck', steps: [{ use: 'lab.noop' }, { use: 'lab.ping' }] });
    await lab.compute.runDueWork();
    // A second one, started a minute later on another node: less overdue, so listed second.
    lab.clock.advance(MINUTE);
    const other = await insertNode(lab.db, { siteId: lab.siteId }, lab.clock);
    const second = await lab.start({ id: 'doc-stuck-2', steps: [{ use: 'lab.ping' }] }, { nodeId: other });
    await lab.compute.runDueWork();
    const step = (await lab.workflow(id)).steps[1];
    expect(step?.state).toBe('waiting');
    const deadline = step?.deadline as Date;
    // At the deadline and up to 5 minutes past it a worker would have failed the step: nothing to report yet.
    lab.clock.set(new Date(deadline.getTime() + DOCTOR_LIMITS.stuckAfterMs));
    expect(await findings()).toEqual([]);
    lab.clock.advance(1_000);
    const [stuck, ...rest] = await findings();
    expect(rest).toEqual([]);
    // The second workflow is still within its 5 minutes.
    expect(stuck).toMatchObject({
      id: 'workflows-stuck',
      severity: 'warning',
      details: {
        count: 1,
        workflows: [
          {
            workflowId: id,
            tenantId: 'root',
            nodeId: lab.nodeId,
            profileId: 'doc-stuck',
            profileVersion: 1,
            state: 'running',
            stepId: 'main.2',
            action: 'lab.ping',
            deadline: deadline.toISOString(),
            overdueMs: DOCTOR_LIMITS.stuckAfterMs + 1_000,
          },
        ],
      },
    });
    lab.clock.advance(MINUTE);
    const [both] = await findings();
    expect(both?.details).toMatchObject({
      count: 2,
      workflows: [
        { workflowId: id, overdueMs: DOCTOR_LIMITS.stuckAfterMs + 1_000 + MINUTE },
        { workflowId: second, nodeId: other, stepId: 'main.1', overdueMs: DOCTOR_LIMITS.stuckAfterMs + 1_000 },
      ],
    });
    expect(stuck?.message).toContain('5 minutes');
    expect(both?.message).toMatch(/^2 active workflows have a step/);
    // A worker that comes back fails the overdue steps, and the finding turns into failed workflows.
    await lab.settle();
    const after = await findings();
    expect(after.map((f) => [f.id, f.details?.count])).toEqual([['workflows-failed', 2]]);
  });

  it('reports workflows-failed for workflows that failed in the last day, bounded, and forgets them after', async () => {
    const ids: string[] = [];
    for (let i = 0; i < DOCTOR_LIMITS.listed + 2; i += 1) {
      ids.push(await lab.start({ id: `doc-fail-${i}`, steps: [{ use: 'lab.throw' }] }));
      await lab.settle();
      lab.clock.advance(1_000);
    }
    const [failed, ...rest] = await findings();
    expect(rest).toEqual([]);
    expect(failed).toMatchObject({
      id: 'workflows-failed',
      severity: 'info',
      details: { count: ids.length, truncated: true },
    });
    const listed = (failed?.details?.workflows ?? []) as { workflowId: string; error: { code: string } }[];
    expect(listed).toHaveLength(DOCTOR_LIMITS.listed);
    // Newest first.
    expect(listed[0]?.workflowId).toBe(ids.at(-1));
    expect(listed[0]).toMatchObject({ nodeId: lab.nodeId, error: { code: 'INTERNAL', stepId: 'main.1' } });
    expect(failed?.message).toMatch(/^22 workflows failed in the last day/);
    lab.clock.advance(DOCTOR_LIMITS.failedWithinMs);
    expect(await findings()).toEqual([]);
  });
});
