import type { SqlExecutor } from '@better-compute/core';

/** The id of the step that renders user data. */
export const USERDATA_RENDER_STEP_ID = 'userdata.render';

/**
 * What `userdata.render` returns and stores as its result: the reference of the stored document, the profile's
 * user-data kind and the id of the join token in it. Never the document or the token.
 *
 * @example
 * ```ts
 * const rendered: RenderedUserData = { userDataRef: 'sec_01k…', kind: 'cloud-init', joinTokenId: 'tok_01k…' };
 * ```
 */
export type RenderedUserData = { userDataRef: string; kind: string; joinTokenId: string };

/**
 * Reads a stored result as {@link RenderedUserData}, or undefined when it does not have that shape.
 *
 * @example
 * ```ts
 * toRenderedUserData(step.result); // { userDataRef, kind, joinTokenId } | undefined
 * ```
 */
export function toRenderedUserData(value: unknown): RenderedUserData | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { userDataRef, kind, joinTokenId } = value as Record<string, unknown>;
  if (typeof userDataRef !== 'string' || typeof kind !== 'string' || typeof joinTokenId !== 'string') return undefined;
  return { userDataRef, kind, joinTokenId };
}

/**
 * The result of the latest succeeded `userdata.render` step of a workflow, read from `workflow_steps` by
 * `workflow_id` and `action`; undefined when there is none. How a later step (`deploy.deploy`, a media step) finds
 * the reference to send.
 *
 * @example
 * ```ts
 * const rendered = await renderedUserData(ctx.sql, ctx.workflowId);
 * if (!rendered) throw new ComputeError('INVALID_STATE', 'run userdata.render first');
 * await awaitCommand(ctx, { nodeId, kind: 'deploy.write', payload: { userDataRef: rendered.userDataRef } });
 * ```
 */
export async function renderedUserData(sql: SqlExecutor, workflowId: string): Promise<RenderedUserData | undefined> {
  const { rows } = await sql.query<{ result: unknown }>(
    `SELECT result FROM workflow_steps WHERE workflow_id = $1 AND action = $2 AND state = 'succeeded'
     ORDER BY finished_at DESC NULLS LAST, position DESC LIMIT 1`,
    [workflowId, USERDATA_RENDER_STEP_ID],
  );
  return toRenderedUserData(rows[0]?.result);
}
