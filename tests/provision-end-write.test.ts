import type { ComputeModule, Logger } from 'better-compute/core';
import {
  type StagedEndWrite,
  type WorkflowEnd,
  type WorkflowEndWrite,
  type WorkflowPreload,
  workflowEndWritesOf,
} from 'better-compute/provision';
import { describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases';
import { lab as labRecord } from './support/engine-lab';
import { rejectionOf } from './support/errors';
import { useEngineLab } from './support/use-engine-lab';

// A workflow owner's end write (`WorkflowEndWrite`): the owner's reaction written by the statement that ends its
// workflow, instead of its reconciler queued for a pass of its own; the reconciler stays the fallback whenever the
// write declines, throws or finds the statement stale.

/** What the plugin's `stage` was called with, and how the test wants it to answer. */
const plugin = {
  seen: [] as WorkflowEnd[],
  mode: 'write' as 'write' | 'decline' | 'throw' | 'never-holds',
  logs: [] as string[],
};

const endWrite: WorkflowEndWrite = {
  extension: 'workflow-end-write',
  id: 'acme',
  owner: 'acme.owner',
  async stage(end): Promise<StagedEndWrite | undefined> {
    plugin.seen.push(end);
    if (plugin.mode === 'decline') return undefined;
    if (plugin.mode === 'throw') throw new Error('acme stage broke');
    const labelled = JSON.stringify({ ended: end.outcome });
    return {
      changes: [
        {
          name: 'acme_ended',
          sql: ({ bind, guard }) =>
            `UPDATE nodes SET labels = labels || ${bind(labelled)}::jsonb WHERE id = ${bind(end.nodeId)} AND ${guard}`,
          // A requirement that never holds makes every statement carrying the write stale.
          ...(plugin.mode === 'never-holds' ? { requires: () => 'FALSE' } : {}),
        },
      ],
      events: [{ tenantId: end.tenantId, subject: `workflow/${end.workflowId}`, type: 'acme.ended', data: {} }],
    };
  },
};

// The plugin's own read with the claim: its end write finds it in `end.reads`.
const nodePreload: WorkflowPreload = {
  extension: 'workflow-preload',
  id: 'acme.node',
  sql: ({ workflow }) => `(SELECT n.id FROM nodes n WHERE n.id = ${workflow}.node_id)`,
};

const acme: ComputeModule = {
  id: 'acme',
  extensions: [endWrite, nodePreload],
  reconcilers: {
    'acme.owner': async (key) => {
      labRecord.owner.push(key);
    },
  },
};

const logger: Logger = {
  debug: () => {},
  info: () => {},
  warn: (message, fields) => plugin.logs.push(`${message} ${JSON.stringify(fields ?? {})}`),
  error: (message, fields) => plugin.logs.push(`${message} ${JSON.stringify(fields ?? {})}`),
};

describe.each(BACKENDS)("a workflow owner's end write on $name", ({ create }) => {
  const getLab = useEngineLab(create, { pluginModules: [acme], kernel: { logger } });

  async function runToEnd(steps: { use: string }[] = [{ use: 'lab.noop' }]) {
    const lab = getLab();
    Object.assign(plugin, { seen: [], mode: plugin.mode, logs: [] });
    const id = await lab.start({ id: 'acme-job', steps }, { owner: 'acme.owner' });
    await lab.settle();
    const { rows } = await lab.db.query<{ ended: string | null }>(
      "SELECT labels->>'ended' AS ended FROM nodes WHERE id = $1",
      [lab.nodeId],
    );
    return { lab, id, ended: rows[0]?.ended ?? null, workflow: await lab.workflow(id) };
  }

  it('is written by the statement that ends the workflow, with its events after the end, and the owner is not queued', async () => {
    plugin.mode = 'write';
    const { lab, id, ended, workflow } = await runToEnd();
    expect(workflow.state).toBe('succeeded');
    expect(ended).toBe('succeeded');
    expect(labRecord.owner).toEqual([]);
    const types = await lab.eventTypes(id);
    expect(types.slice(-2)).toEqual(['workflow.succeeded', 'acme.ended']);
    // Staged once, from the claim's reads (the plugin's own preload among them).
    expect(plugin.seen).toHaveLength(1);
    expect(plugin.seen[0]).toMatchObject({
      workflowId: id,
      key: lab.nodeId,
      nodeId: lab.nodeId,
      tenantId: 'root',
      outcome: 'succeeded',
      error: null,
      reads: { 'acme.node': lab.nodeId },
    });
  });

  it('is told how a failed workflow ended, with its error', async () => {
    plugin.mode = 'write';
    const { ended, workflow } = await runToEnd([{ use: 'lab.throw' }]);
    expect(workflow.state).toBe('failed');
    expect(ended).toBe('failed');
    expect(plugin.seen[0]?.error).toMatchObject({ stepId: 'main.1' });
    expect(labRecord.owner).toEqual([]);
  });

  it('queues the owner when the write declines', async () => {
    plugin.mode = 'decline';
    const { lab, ended, workflow } = await runToEnd();
    expect(workflow.state).toBe('succeeded');
    expect(ended).toBeNull();
    expect(labRecord.owner).toEqual([lab.nodeId]);
  });

  it('queues the owner, and logs, when the write throws', async () => {
    plugin.mode = 'throw';
    const { lab, ended, workflow } = await runToEnd();
    expect(workflow.state).toBe('succeeded');
    expect(ended).toBeNull();
    expect(labRecord.owner).toEqual([lab.nodeId]);
    expect(plugin.logs.some((line) => line.includes('acme stage broke'))).toBe(true);
  });

  it("queues the owner instead when the statement that ends the workflow writes a run's writes with its result", async () => {
    // Both update the node's row, and PostgreSQL applies only the first update of a row in a statement.
    plugin.mode = 'write';
    const { lab, ended, workflow } = await runToEnd([{ use: 'lab.writeWith' }]);
    expect(workflow.state).toBe('succeeded');
    const { rows } = await lab.db.query<{ n: string | null }>(
      "SELECT labels->>'result-with' AS n FROM nodes WHERE id = $1",
      [lab.nodeId],
    );
    expect(rows[0]?.n).toBe('1');
    expect(ended).toBeNull();
    expect(labRecord.owner).toEqual([lab.nodeId]);
  });

  it('ends the workflow without the write, and queues the owner, when the statement carrying it is stale', async () => {
    plugin.mode = 'never-holds';
    const { lab, id, ended, workflow } = await runToEnd();
    expect(workflow.state).toBe('succeeded');
    expect(ended).toBeNull();
    expect(labRecord.owner).toEqual([lab.nodeId]);
    expect(await lab.eventTypes(id)).not.toContain('acme.ended');
    // Tried once; the pass then ended the workflow without it.
    expect(plugin.seen).toHaveLength(1);
  });
});

describe('workflowEndWritesOf', () => {
  it('collects the end writes of modules by owner', () => {
    const found = workflowEndWritesOf([{ extensions: [{ extension: 'workflow-preload', id: 'x' }] }, acme]);
    expect([...found.keys()]).toEqual(['acme.owner']);
    expect(found.get('acme.owner')).toBe(endWrite);
  });

  it('refuses a second end write for an owner, one without an owner or without stage, with INVALID_CONFIG at its path', async () => {
    const twice = await rejectionOf(async () =>
      workflowEndWritesOf([acme, { extensions: [{ ...endWrite, id: 'acme-2' }] }]),
    );
    expect(twice).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['modules', 1, 'extensions', 0, 'owner'] },
    });
    const ownerless = await rejectionOf(async () =>
      workflowEndWritesOf([{ extensions: [{ ...endWrite, owner: '' }] }]),
    );
    expect(ownerless).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['modules', 0, 'extensions', 0, 'owner'] },
    });
    const stageless = await rejectionOf(async () =>
      workflowEndWritesOf([{ extensions: [{ extension: 'workflow-end-write', id: 'a', owner: 'a' }] }]),
    );
    expect(stageless).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['modules', 0, 'extensions', 0, 'stage'] },
    });
  });
});
