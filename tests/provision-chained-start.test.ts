import type { ComputeModule, Json } from 'better-compute/core';
import { field, manifest } from 'better-compute/core';
import {
  awaitCommand,
  defineStep,
  type FollowingWorkflow,
  type StagedEndWrite,
  type WorkflowEndWrite,
  type WorkflowPreload,
  workflowPreloadsOf,
} from 'better-compute/provision';
import { describe, expect, it } from 'vitest';
import { BACKENDS, type ScratchDatabase } from './support/databases';
import { lab as labRecord } from './support/engine-lab';
import { rejectionOf } from './support/errors';
import { type StatementTap, tappedDatabase } from './support/statement-tap';
import { useEngineLab } from './support/use-engine-lab';

// The key's next workflow started by an owner's end write (`StagedEndWrite.next`) goes on in the pass that ended the
// workflow before it: its start, its first step's `running` mark and that step's send are written by the statement
// that ends the workflow, when every preload the claim read says what it would read for the next workflow
// (`WorkflowPreload.following`). Otherwise the start is written as staged and the next workflow waits for its claim.

const plugin = {
  mode: 'chain' as 'chain' | 'cannot-follow' | 'never-holds' | 'site-step-first',
  followed: [] as FollowingWorkflow[],
  // What the next workflow's relaying step found among its preloads, by run.
  preloadsSeen: [] as (Json | undefined)[],
};

// The plugin's read with the claim: the node and its site's agent, which its relaying step sends to without a read.
const sitePreload: WorkflowPreload = {
  extension: 'workflow-preload',
  id: 'acme.site',
  sql: ({ workflow }) => `(SELECT json_build_object('nodeId', n.id, 'siteAgentId',
      (SELECT a.id FROM nodes a WHERE a.site_id = n.site_id AND a.kind = 'site-agent' ORDER BY a.id LIMIT 1),
      'workflowId', ${workflow}.id)
    FROM nodes n WHERE n.id = ${workflow}.node_id)`,
  following: (value, next) => {
    plugin.followed.push(next);
    if (plugin.mode === 'cannot-follow') return undefined;
    return { ...(value as Record<string, Json>), workflowId: next.workflowId };
  },
};

const acmeRelay = defineStep({
  id: 'acme.relay',
  runsOn: 'control-plane',
  relays: ['site'],
  sends: ['lab.wipe'],
  timeout: '20m',
  retrySafe: true,
  input: manifest({ tag: field.string().optional() }),
  async run(_input, ctx) {
    const read = ctx.preloads?.reads['acme.site'] as { siteAgentId?: string } | undefined;
    plugin.preloadsSeen.push(read as Json | undefined);
    const siteAgentId =
      read?.siteAgentId ??
      (
        await ctx.sql.query<{ id: string }>(
          "SELECT a.id FROM nodes a JOIN nodes n ON n.site_id = a.site_id WHERE n.id = $1 AND a.kind = 'site-agent'",
          [ctx.node?.id],
        )
      ).rows[0]?.id;
    if (!siteAgentId) throw new Error('no site agent');
    const sent = await awaitCommand(ctx, {
      nodeId: siteAgentId,
      kind: 'lab.wipe',
      payload: {},
      targetNodeId: ctx.node?.id as string,
    });
    return { commandId: sent.commandId };
  },
});

const nextProfile = {
  id: 'acme.next',
  version: 1,
  target: 'metal' as const,
  steps: [{ use: 'acme.relay' }, { use: 'lab.noop' }],
};

// A next workflow whose first step is a site agent's own (an agent step): nothing to chain.
const siteStepFirst = {
  id: 'acme.next-site',
  version: 1,
  target: 'metal' as const,
  steps: [{ use: 'lab.sitePing', with: { n: 1 } }, { use: 'lab.noop' }],
};

const endWrite: WorkflowEndWrite = {
  extension: 'workflow-end-write',
  id: 'acme',
  owner: 'acme.owner',
  async stage(end, ctx): Promise<StagedEndWrite | undefined> {
    if (end.outcome !== 'succeeded' || end.nodeId === null) return undefined;
    const { rows } = await ctx.sql.query<{ profile_id: string }>('SELECT profile_id FROM workflows WHERE id = $1', [
      end.workflowId,
    ]);
    // The next workflow's end: nothing to write, and nothing for the owner to do.
    if (rows[0]?.profile_id !== 'acme-first') return { changes: [] };
    const next = await ctx.workflows?.stageStart?.(ctx.sql, {
      tenantId: end.tenantId,
      profileId: plugin.mode === 'site-step-first' ? siteStepFirst.id : nextProfile.id,
      nodeId: end.nodeId,
      owner: 'acme.owner',
    });
    if (!next) return undefined;
    const marked = JSON.stringify({ chained: 'yes' });
    return {
      changes: [
        ...next.changes,
        {
          name: 'acme_marked',
          sql: ({ bind, guard }) =>
            `UPDATE nodes SET labels = labels || ${bind(marked)}::jsonb WHERE id = ${bind(end.nodeId)} AND ${guard}`,
          ...(plugin.mode === 'never-holds' ? { requires: () => 'FALSE' } : {}),
        },
      ],
      events: [...next.events],
      wake: next.wake,
      next,
    };
  },
};

const acme: ComputeModule = {
  id: 'acme',
  extensions: [endWrite, sitePreload],
  reconcilers: {
    'acme.owner': async (key) => {
      labRecord.owner.push(key);
    },
  },
};

const tap: StatementTap = { recorded: undefined, after: undefined };

const tapped = (create: () => Promise<ScratchDatabase>) => async () => {
  const scratch = await create();
  return { ...scratch, db: tappedDatabase(scratch.db, tap, { inTransactions: true }) };
};

const ENDS_FIRST_AND_STARTS_NEXT = (text: string) =>
  /UPDATE workflows SET revision/.test(text) && /INSERT INTO workflows/.test(text);

describe.each(BACKENDS)('the next workflow an end write starts, on $name', ({ create }) => {
  const getLab = useEngineLab(tapped(create), {
    pluginModules: [acme],
    steps: [acmeRelay],
    profiles: [nextProfile, siteStepFirst],
  });

  async function runChain(mode: typeof plugin.mode) {
    const lab = getLab();
    Object.assign(plugin, { mode, followed: [], preloadsSeen: [] });
    const first = await lab.start({ id: 'acme-first', steps: [{ use: 'lab.noop' }] }, { owner: 'acme.owner' });
    tap.recorded = [];
    await lab.settle();
    const statements = tap.recorded;
    tap.recorded = undefined;
    const { rows } = await lab.db.query<{ id: string; profile_id: string; state: string }>(
      'SELECT id, profile_id, state FROM workflows WHERE node_id = $1 ORDER BY created_at, id',
      [lab.nodeId],
    );
    const next = rows.find((row) => row.profile_id !== 'acme-first');
    const commands = await lab.db.query<{ kind: string; workflow_id: string }>(
      'SELECT kind, workflow_id FROM commands ORDER BY created_at',
    );
    return { lab, first, next, statements, commands: commands.rows };
  }

  it('writes its start and its first step’s send with the statement that ends the workflow before it', async () => {
    const { lab, first, next, statements, commands } = await runChain('chain');
    expect((await lab.workflow(first)).state).toBe('succeeded');
    expect(next?.state).toBe('succeeded');
    const nextId = next?.id as string;
    // One statement ended the first workflow, inserted the next one started, and sent its step's command.
    const chained = statements.filter(ENDS_FIRST_AND_STARTS_NEXT);
    expect(chained).toHaveLength(1);
    expect(chained[0]).toMatch(/INSERT INTO commands/);
    expect(commands).toEqual([{ kind: 'lab.wipe', workflow_id: nextId }]);
    // Its events as a start in a statement of its own would have written them, in order.
    expect(await lab.eventTypes(nextId)).toEqual([
      'workflow.created',
      'workflow.started',
      'workflow.step.started',
      'workflow.step.succeeded',
      'workflow.step.started',
      'workflow.step.succeeded',
      'workflow.succeeded',
    ]);
    expect((await lab.eventTypes(first)).slice(-1)).toEqual(['workflow.succeeded']);
    // The preload was told the next workflow, and its step ran on what the preload said, without a read.
    expect(plugin.followed).toHaveLength(1);
    expect(plugin.followed[0]).toMatchObject({ workflowId: nextId, nodeId: lab.nodeId });
    expect(plugin.followed[0]?.document.id).toBe(nextProfile.id);
    expect(plugin.preloadsSeen[0]).toMatchObject({ workflowId: nextId, siteAgentId: lab.siteAgent.nodeId });
    const { rows } = await lab.db.query<{ chained: string | null }>(
      "SELECT labels->>'chained' AS chained FROM nodes WHERE id = $1",
      [lab.nodeId],
    );
    expect(rows[0]?.chained).toBe('yes');
    expect(labRecord.owner).toEqual([]);
  });

  it('writes the start as staged, for the next workflow’s own claim, when a preload cannot say what it would read', async () => {
    const { next, statements, commands } = await runChain('cannot-follow');
    expect(next?.state).toBe('succeeded');
    const ended = statements.filter(ENDS_FIRST_AND_STARTS_NEXT);
    expect(ended).toHaveLength(1);
    expect(ended[0]).not.toMatch(/INSERT INTO commands/);
    expect(commands).toEqual([{ kind: 'lab.wipe', workflow_id: next?.id }]);
    // The step ran after the next workflow's claim, with what that claim read.
    expect(plugin.preloadsSeen[0]).toMatchObject({ workflowId: next?.id });
  });

  it('writes the start as staged, reading nothing for it, when the next workflow’s first step is an agent step', async () => {
    const { next, statements, commands } = await runChain('site-step-first');
    expect(next?.state).toBe('succeeded');
    const ended = statements.filter(ENDS_FIRST_AND_STARTS_NEXT);
    expect(ended).toHaveLength(1);
    expect(ended[0]).not.toMatch(/INSERT INTO commands/);
    expect(commands).toEqual([{ kind: 'lab.ping', workflow_id: next?.id }]);
    // The site step's agent came from the next workflow's own claim: the ending pass did not plan that step.
    expect(statements.filter((text) => /^\s*SELECT s\.\*, n\.name FROM nodes n/.test(text))).toEqual([]);
  });

  it('writes nothing of the next workflow when the statement is stale, and ends the first without the end write', async () => {
    const { lab, first, next, commands } = await runChain('never-holds');
    expect((await lab.workflow(first)).state).toBe('succeeded');
    expect(next).toBeUndefined();
    expect(commands).toEqual([]);
    expect(labRecord.owner).toEqual([lab.nodeId]);
    // The step's run was planned and run, but superseded: none of it reached the database.
    expect(plugin.preloadsSeen).toHaveLength(1);
  });
});

describe('workflowPreloadsOf', () => {
  it('refuses a `following` that is not a function, with INVALID_CONFIG at its path', async () => {
    const refused = await rejectionOf(async () =>
      workflowPreloadsOf([{ extensions: [{ ...sitePreload, following: 'yes' }] }]),
    );
    expect(refused).toMatchObject({
      code: 'INVALID_CONFIG',
      details: { path: ['modules', 0, 'extensions', 0, 'following'] },
    });
  });
});
