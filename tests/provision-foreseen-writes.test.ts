import { type ComputeModule, field, type Json, manifest } from 'better-compute/core';
import type { StagedWrite } from 'better-compute/core/kernel';
import { defineStep, type WorkflowPreload } from 'better-compute/provision';
import { describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases';
import { useEngineLab } from './support/use-engine-lab';

// A write a step's run hands the engine with its result, and what a run started after it in the same pass finds of
// the claim's reads (the modules' preloads): as the write says it leaves them, or nothing, to read for itself once it
// committed, when the write cannot say (`leaves.runReads: 'changed'`) or says nothing at all.

/** What `acme.look` found of the claim's `acme.count` read, run after run. */
const looked: Json[] = [];

// The claim's read of the node's `count` label, for the runs.
const countPreload: WorkflowPreload = {
  extension: 'workflow-preload',
  id: 'acme.count',
  sql: ({ workflow }) => `(SELECT n.labels->>'count' FROM nodes n WHERE n.id = ${workflow}.node_id)`,
};

const MODES = ['reads-after', 'changed', 'unsaid'] as const;

/** Counts one up in the node's `count` label, written with the result, saying per `mode` what it leaves. */
function bumpWrite(nodeId: string, next: string, mode: (typeof MODES)[number]): StagedWrite {
  const update = (node: string, value: string) =>
    `UPDATE nodes SET labels = labels || jsonb_build_object('count', ${value}::text) WHERE id = ${node}`;
  const leaves =
    mode === 'unsaid'
      ? {}
      : {
          leaves: {
            runReads:
              mode === 'changed'
                ? ('changed' as const)
                : (reads: Readonly<Record<string, Json>>) => ({ ...reads, 'acme.count': next }),
          },
        };
  return {
    changes: [{ name: 'acme_bump', sql: ({ bind, guard }) => `${update(bind(nodeId), bind(next))} AND ${guard}` }],
    async write(tx) {
      await tx.query(update('$1', '$2'), [nodeId, next]);
    },
    ...leaves,
  };
}

const acme: ComputeModule = {
  id: 'acme',
  extensions: [
    countPreload,
    defineStep({
      id: 'acme.bump',
      runsOn: 'control-plane',
      timeout: '1m',
      retrySafe: true,
      input: manifest({ mode: field.enum(MODES) }),
      async run(input, ctx) {
        const counted = ctx.preloads?.reads['acme.count'];
        const next = String((typeof counted === 'string' ? Number(counted) : 0) + 1);
        ctx.writeWithResult?.(bumpWrite(ctx.node!.id, next, input.mode));
        return { next };
      },
    }),
    defineStep({
      id: 'acme.look',
      runsOn: 'control-plane',
      timeout: '1m',
      retrySafe: true,
      input: manifest({}),
      async run(_input, ctx) {
        looked.push(ctx.preloads ? (ctx.preloads.reads['acme.count'] ?? null) : 'not preloaded');
        return null;
      },
    }),
  ],
};

describe.each(BACKENDS)("what a run finds after a run's write with its result, on $name", ({ create }) => {
  const getLab = useEngineLab(create, { pluginModules: [acme] });

  async function bumpThenLook(mode: (typeof MODES)[number]) {
    const lab = getLab();
    looked.length = 0;
    const id = await lab.start({
      id: `acme-${mode}`,
      steps: [{ use: 'acme.bump', with: { mode } }, { use: 'acme.look' }],
    });
    await lab.settle();
    const { rows } = await lab.db.query<{ count: string | null }>(
      "SELECT labels->>'count' AS count FROM nodes WHERE id = $1",
      [lab.nodeId],
    );
    return { workflow: await lab.workflow(id), count: rows[0]?.count ?? null };
  }

  it('a run after a write that gives the reads it leaves takes them: the value it wrote, before it was read back', async () => {
    const { workflow, count } = await bumpThenLook('reads-after');
    expect(workflow.state).toBe('succeeded');
    expect(count).toBe('1');
    expect(looked).toEqual(['1']);
  });

  it("a run after a write that changes the claim's reads unsaid is given none: it reads for itself", async () => {
    const { workflow, count } = await bumpThenLook('changed');
    expect(workflow.state).toBe('succeeded');
    expect(count).toBe('1');
    expect(looked).toEqual(['not preloaded']);
  });

  it('a run after a write that says nothing of what it leaves is given none either', async () => {
    const { workflow, count } = await bumpThenLook('unsaid');
    expect(workflow.state).toBe('succeeded');
    expect(count).toBe('1');
    expect(looked).toEqual(['not preloaded']);
  });
});
