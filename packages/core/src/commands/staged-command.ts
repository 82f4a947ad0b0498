import type { Json } from '../json/types';

/**
 * A new command checked and given its id, not yet written: what `CommandStaging.stage` returns, for a caller that writes it
 * as a CTE of its own statement ({@link stagedCommandInsertSql}) so the command commits with the change that sends it.
 */
export interface StagedCommand {
  readonly id: string;
  readonly nodeId: string;
  readonly kind: string;
  /** The payload as its kind's manifest validated it. */
  readonly payload: Json;
  readonly key: string;
  readonly notAfter: Date;
  readonly batchId?: string;
  readonly workflowId?: string;
  readonly stepId?: string;
  readonly targetNodeId?: string;
  readonly wake?: { readonly kind: string; readonly key: string };
  readonly wakeOn?: 'settle' | 'failure';
  readonly afterKey?: string;
}

/**
 * The body of a data-modifying CTE that inserts staged commands `pending`, from one jsonb array parameter built by
 * {@link stagedCommandParam}, stamped `created_at` with the timestamptz `createdAt` names. The tenant is the node's,
 * read in the same statement; no row is written when the node does not exist or `condition` is false, so gate it on
 * the change the command belongs to. It does not look for a command already under the key: one there makes the
 * statement fail as a unique violation (`commands_node_key_uq`), and the caller falls back to `commands.enqueue`,
 * which is find-before-create. `RETURNING id` lets the statement tell how many were written.
 *
 * @example
 * ```ts
 * const text = `WITH changed AS (UPDATE workflow_steps SET command_id = $3 WHERE … RETURNING 1),
 *   sent AS (${stagedCommandInsertSql('$1', '$2', 'EXISTS (SELECT 1 FROM changed)')})
 *   SELECT count(*) FROM sent`;
 * await sql.query(text, [stagedCommandParam(command), now, command.id]);
 * ```
 */
export function stagedCommandInsertSql(param: string, createdAt: string, condition = 'TRUE'): string {
  return `INSERT INTO commands (id, tenant_id, node_id, kind, payload, key, state, not_after, batch_id, workflow_id,
      step_id, target_node_id, wake_kind, wake_key, wake_on, after_key, created_at, updated_at)
    SELECT c->>'id', n.tenant_id, n.id, c->>'kind', c->'payload', c->>'key', 'pending', (c->>'notAfter')::timestamptz,
      c->>'batchId', c->>'workflowId', c->>'stepId', c->>'targetNodeId', c->'wake'->>'kind', c->'wake'->>'key',
      NULLIF(c->>'wakeOn', 'settle'), c->>'afterKey', ${createdAt}, ${createdAt}
    FROM jsonb_array_elements(${param}::jsonb) AS staged(c) JOIN nodes n ON n.id = staged.c->>'nodeId'
    WHERE ${condition}
    RETURNING id`;
}

/**
 * The parameter {@link stagedCommandInsertSql} reads: the staged commands (one, or a sequence in order) as a JSON
 * array's text.
 *
 * @example
 * ```ts
 * const param = stagedCommandParam(await queue.stage(input));
 * ```
 */
export function stagedCommandParam(commands: StagedCommand | readonly StagedCommand[]): string {
  const list: readonly StagedCommand[] = Array.isArray(commands) ? commands : [commands as StagedCommand];
  return JSON.stringify(list.map((command) => ({ ...command, notAfter: command.notAfter.toISOString() })));
}
