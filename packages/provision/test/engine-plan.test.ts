import type { ModuleContext, SqlExecutor } from '@better-compute/core';
import { describe, expect, it } from 'vitest';
import { BUILTIN_CONFIG_UNIT_REGISTRY } from '../src/config-units/registry';
import type { Profile } from '../src/define/types';
import { advanceWorkflow } from '../src/engine/advance';
import type { EngineEnv } from '../src/engine/transitions';
import type { LoadedWorkflow, StepRecord, WorkflowRecord } from '../src/engine/workflow-rows';

// Transitions decide on the snapshot and return plans: any statement is a bug, so the executor throws.
const noSql: SqlExecutor = {
  query: () => Promise.reject(new Error('a transition touched SQL')),
  transaction: () => Promise.reject(new Error('a transition touched SQL')),
};
const env: EngineEnv = {
  ctx: { sql: noSql, commandKinds: new Map() } as unknown as ModuleContext,
  steps: new Map(),
  configUnits: BUILTIN_CONFIG_UNIT_REGISTRY,
};
const now = new Date('2026-03-01T00:00:00Z');

function workflow(change: Partial<WorkflowRecord> = {}): WorkflowRecord {
  return {
    id: 'wf_1',
    tenantId: 'root',
    nodeId: 'node_1',
    instanceId: null,
    key: 'node_1',
    profileId: 'p',
    profileVersion: 1,
    profileTenantId: 'root',
    document: { id: 'p', version: 1 } as Profile,
    state: 'running',
    error: null,
    owner: null,
    commandKinds: [],
    batchId: null,
    cancelReason: null,
    createdAt: now,
    updatedAt: now,
    startedAt: now,
    finishedAt: null,
    revision: 3,
    node: { id: 'node_1', siteId: 'site_1', labels: {} },
    ...change,
  };
}

function step(stepId: string, change: Partial<StepRecord> = {}): StepRecord {
  return {
    workflowId: 'wf_1',
    stepId,
    position: 1,
    phase: 'main',
    parentStepId: null,
    action: 'bench.noop',
    resolution: 'step',
    runsOn: 'control-plane',
    spec: { use: 'bench.noop' },
    timeoutMs: 60_000,
    retries: 0,
    onFailure: 'fail',
    awaitRejoin: false,
    commandKind: null,
    state: 'pending',
    attempt: 0,
    attemptBase: 0,
    commandId: null,
    deadline: null,
    startedAt: null,
    firstStartedAt: null,
    finishedAt: null,
    result: null,
    error: null,
    rejoin: null,
    ...change,
  };
}

const snapshotOf = (w: WorkflowRecord, steps: StepRecord[]): LoadedWorkflow => ({ workflow: w, steps });

describe('a transition decides on the snapshot and returns a plan', () => {
  it('starts a pending workflow: the workflow change and its event, the snapshot untouched', async () => {
    const snapshot = snapshotOf(workflow({ state: 'pending', startedAt: null }), [step('main.1')]);
    const before = structuredClone(snapshot);
    const t = await advanceWorkflow(env, snapshot, {}, now);
    expect('needs' in t).toBe(false);
    if ('needs' in t) return;
    expect(t.decision).toEqual({ kind: 'continue' });
    expect(t.plan.workflowChanged).toBe(true);
    expect(t.plan.workflow.state).toBe('running');
    expect(t.plan.events.map((e) => e.type)).toEqual(['workflow.started']);
    expect(t.next.workflow.state).toBe('running');
    expect(snapshot).toEqual(before);
  });

  it('starts a control-plane step and asks to run it', async () => {
    const t = await advanceWorkflow(env, snapshotOf(workflow(), [step('main.1')]), {}, now);
    if ('needs' in t) throw new Error('no need expected');
    expect(t.decision.kind).toBe('run');
    expect([...t.plan.steps.values()].map((s) => [s.stepId, s.state])).toEqual([['main.1', 'running']]);
    expect(t.plan.events.map((e) => e.type)).toEqual(['workflow.step.started']);
    expect(t.plan.command).toBeUndefined();
  });

  it("depends on the node's labels only when it evaluated a when on them", async () => {
    const plain = await advanceWorkflow(env, snapshotOf(workflow(), [step('main.1')]), {}, now);
    if ('needs' in plain) throw new Error('no need expected');
    expect(plain.plan.readsLabels).toBe(false);
    const guarded = snapshotOf(workflow({ node: { id: 'node_1', siteId: 'site_1', labels: { 'gpu.count': '8' } } }), [
      step('main.1', { spec: { use: 'bench.noop', when: 'gpu.count' } }),
    ]);
    const t = await advanceWorkflow(env, guarded, {}, now);
    if ('needs' in t) throw new Error('no need expected');
    expect(t.decision.kind).toBe('run');
    expect(t.plan.readsLabels).toBe(true);
  });

  it('needs a site agent for a site step, and plans nothing until it knows', async () => {
    const site = step('main.1', {
      runsOn: 'site',
      resolution: 'driver',
      action: 'power.on',
      commandKind: 'driver.invoke',
      spec: { use: 'power.on', on: 'site' },
    });
    const snapshot = snapshotOf(workflow(), [site]);
    const before = structuredClone(snapshot);
    expect(await advanceWorkflow(env, snapshot, {}, now)).toEqual({
      needs: { kind: 'site-agent', nodeId: 'node_1', siteId: 'site_1' },
    });
    expect(snapshot).toEqual(before);
    const known = { siteAgent: { nodeId: 'node_agent' } as never };
    const t = await advanceWorkflow(env, snapshot, known, now);
    if ('needs' in t) throw new Error('no need expected');
    expect(t.decision.kind).toBe('wait');
    expect(t.plan.command?.stepId).toBe('main.1');
    expect(t.plan.command?.input).toMatchObject({
      nodeId: 'node_agent',
      kind: 'driver.invoke',
      targetNodeId: 'node_1',
    });
    expect(t.plan.steps.get('main.1')?.state).toBe('waiting');
  });

  it('needs the host config resolved before a node workflow with one succeeds; a resolution error fails it', async () => {
    const w = workflow({ document: { id: 'p', version: 1, hostConfig: { units: [] } } as unknown as Profile });
    const done = step('main.1', { state: 'succeeded', firstStartedAt: now, finishedAt: now });
    const snapshot = snapshotOf(w, [done]);
    const t = await advanceWorkflow(env, snapshot, {}, now);
    expect(t).toEqual({ needs: { kind: 'host-config', nodeId: 'node_1', hostConfig: { units: [] } } });
    const error = {
      code: 'INVALID_INPUT' as const,
      message: 'hostConfig: no',
      stepId: 'hostConfig',
      action: 'hostConfig',
    };
    const failed = await advanceWorkflow(env, snapshot, { hostConfig: { error } }, now);
    if ('needs' in failed) throw new Error('no need expected');
    expect(failed.plan.workflow.state).toBe('failed');
    expect(failed.plan.hostConfig).toBeUndefined();
    expect(failed.plan.events.map((e) => e.type)).toEqual(['workflow.failed']);
    const host = { units: [] };
    const succeeded = await advanceWorkflow(env, snapshot, { hostConfig: { host } }, now);
    if ('needs' in succeeded) throw new Error('no need expected');
    expect(succeeded.plan.hostConfig).toEqual({ nodeId: 'node_1', host });
    expect(succeeded.plan.workflow.state).toBe('succeeded');
  });

  it('needs a waiting step command it did not read with the workflow, then cancels it at the deadline', async () => {
    const waiting = step('main.1', {
      runsOn: 'node',
      resolution: 'driver',
      action: 'disk.wipe',
      commandKind: 'driver.invoke',
      state: 'waiting',
      commandId: 'cmd_1',
      deadline: new Date(now.getTime() - 1),
    });
    const snapshot = snapshotOf(workflow(), [waiting]);
    expect(await advanceWorkflow(env, snapshot, {}, now)).toEqual({ needs: { kind: 'command', commandId: 'cmd_1' } });
    const command = { id: 'cmd_1', kind: 'driver.invoke', state: 'running', reason: null, result: undefined } as never;
    const t = await advanceWorkflow(env, snapshot, { command }, now);
    if ('needs' in t) throw new Error('no need expected');
    expect(t.plan.cancels).toEqual([{ commandId: 'cmd_1', reason: 'the step timed out' }]);
    expect(t.plan.steps.get('main.1')?.error?.code).toBe('TIMEOUT');
  });
});
