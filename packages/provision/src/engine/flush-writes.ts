import {
  fencedError,
  leaseFenceParams,
  leaseFenceSql,
  requeueItemSql,
  type ShardLease,
  type SqlExecutor,
  stagedCommandInsertSql,
  stagedCommandParam,
  stagedEventsInsertSql,
  stagedEventsParam,
} from '@better-compute/core';
import type { StagedWrites } from './staged-writes';
import { STEP_CHANGE_FIELDS } from './workflow-rows';

/** What a guarded flush checks besides the node's labels (which come with the workflow): the revision and the lease. */
export interface FlushGuard {
  /** The workflow's revision the writes were planned from. */
  revision: number;
  /** The worker's shard lease; undefined outside a worker (tests driving a reconciler directly). */
  lease: ShardLease | undefined;
  /** The pass's own work item, requeued at `at` by the same statement when the workflow row is written. */
  requeue?: { kind: string; key: string; at: Date };
}

// The step columns a transition may change, from the staged step's JSON (`->>` is SQL NULL for a JSON null).
const STEP_SETS = `state = v->>'state', attempt = (v->>'attempt')::int, attempt_base = (v->>'attemptBase')::int,
  command_id = v->>'commandId', deadline = (v->>'deadline')::timestamptz, started_at = (v->>'startedAt')::timestamptz,
  first_started_at = (v->>'firstStartedAt')::timestamptz, finished_at = (v->>'finishedAt')::timestamptz,
  result = NULLIF(v->'result', 'null'::jsonb), error = NULLIF(v->'error', 'null'::jsonb),
  rejoin = NULLIF(v->'rejoin', 'null'::jsonb)`;

function stepsParam(writes: StagedWrites): string {
  return JSON.stringify(
    [...writes.steps.values()].map((step) =>
      Object.fromEntries([['stepId', step.stepId], ...STEP_CHANGE_FIELDS.map((field) => [field, step[field]])]),
    ),
  );
}

/**
 * Writes staged transitions in one statement: the workflow row (its revision bumped), every changed step, the
 * command an agent step sends, and the events in order. With a `guard` (no transaction around it) the statement writes
 * only while the workflow's revision is still the one planned from, its node's labels are still those the plan read,
 * and the worker still holds its shard lease (else INVALID_STATE `fenced`, as a fenced transaction would be); it
 * returns the new revision, or undefined when the plan was stale and nothing was written. Inside a transaction that
 * locked the workflow, pass no guard. A staged command whose key is taken already fails the statement as a unique
 * violation, and nothing is written.
 *
 * @example
 * ```ts
 * const revision = await flushWrites(ctx.sql, staged, now, { revision: 7, lease: leaseOf(ctx.sql) });
 * if (revision === undefined) snapshot = await readActiveWorkflow(ctx.sql, key);
 * ```
 */
export async function flushWrites(
  sql: SqlExecutor,
  writes: StagedWrites,
  now: Date,
  guard: FlushGuard | undefined,
): Promise<number | undefined> {
  const w = writes.workflow;
  const params: unknown[] = [w.id, now, stepsParam(writes), stagedEventsParam(writes.events)];
  const param = (value: unknown) => {
    params.push(value);
    return `$${params.length}`;
  };
  const workflowSets = writes.workflowChanged
    ? `, state = ${param(w.state)}, error = ${param(w.error === null ? null : JSON.stringify(w.error))}::jsonb,
       started_at = ${param(w.startedAt)}::timestamptz, finished_at = ${param(w.finishedAt)}::timestamptz,
       cancel_reason = ${param(w.cancelReason)}, updated_at = $2`
    : '';
  const conditions: string[] = [];
  let fence = '';
  // An agent step's command, sent by the same statement: inserted only with the workflow's change (a stale plan sends
  // nothing), and never without it (its node is there, or the statement writes nothing; a guard's labels check below
  // already reads that node).
  let sent = '';
  if (writes.command) {
    if (!guard || w.node?.id !== writes.command.nodeId) {
      conditions.push(`EXISTS (SELECT 1 FROM nodes WHERE id = ${param(writes.command.nodeId)})`);
    }
    const command = param(stagedCommandParam(writes.command));
    sent = `sent AS (${stagedCommandInsertSql(command, '$2', 'EXISTS (SELECT 1 FROM wf)')}),`;
  }
  // The pass ends here: its work item's requeue commits with the transition, so the worker records nothing.
  let requeued = '';
  if (guard?.requeue) {
    const { kind, key, at } = guard.requeue;
    const condition = 'EXISTS (SELECT 1 FROM wf)';
    requeued = `rq AS (${requeueItemSql({ kind: param(kind), key: param(key), at: param(at), now: '$2', condition })}),`;
  }
  if (guard) {
    conditions.push(`revision = ${param(guard.revision)}`);
    // The plan evaluated `when` on these labels: a step run may have changed them (inspection sets labels).
    if (w.node) {
      conditions.push(
        `EXISTS (SELECT 1 FROM nodes WHERE id = ${param(w.node.id)} AND labels = ${param(JSON.stringify(w.node.labels))}::jsonb)`,
      );
    }
    if (guard.lease) {
      fence = `fence AS (${leaseFenceSql(params.length + 1)}),`;
      params.push(...leaseFenceParams(guard.lease));
      conditions.push('EXISTS (SELECT 1 FROM fence)');
    }
  }
  const { rows } = await sql.query<{ revision: number | null; held: boolean }>(
    `WITH ${fence}
     wf AS (UPDATE workflows SET revision = revision + 1${workflowSets}
       WHERE id = $1${conditions.map((c) => ` AND ${c}`).join('')} RETURNING revision),
     st AS (UPDATE workflow_steps s SET ${STEP_SETS}, updated_at = $2
       FROM jsonb_array_elements($3::jsonb) v
       WHERE s.workflow_id = $1 AND s.step_id = v->>'stepId' AND EXISTS (SELECT 1 FROM wf)),
     ${sent}
     ${requeued}
     ev AS (${stagedEventsInsertSql('$4', 'EXISTS (SELECT 1 FROM wf)')})
     SELECT (SELECT revision FROM wf) AS revision, ${fence ? 'EXISTS (SELECT 1 FROM fence)' : 'TRUE'} AS held`,
    params,
  );
  const row = rows[0];
  if (guard?.lease && row && !row.held) throw fencedError(guard.lease);
  return row?.revision === null || row?.revision === undefined ? undefined : Number(row.revision);
}
