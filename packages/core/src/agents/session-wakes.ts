import { requireText } from '../checks/checks';
import { ComputeError } from '../errors';
import type { SqlExecutor } from '../sql/executor';
import { shardedWakeSql } from '../work/work-queue';

/**
 * Records the work kinds `openAgentSession` queues, keyed by the node id, when an agent of a node opens a
 * session: the table becomes exactly `kinds` (a kind no module declares any more is dropped, so no item is queued for
 * a kind without a reconciler), with `shards`, the shard count the keys hash into. `betterCompute` calls it at every
 * start with its modules' `wakeOnAgentSession`; every process of a deployment runs the same modules. One statement.
 *
 * @example
 * ```ts
 * await recordAgentSessionWakes(db, ['workflow'], 64);
 * ```
 */
export async function recordAgentSessionWakes(
  sql: SqlExecutor,
  kinds: readonly string[],
  shards: number,
): Promise<void> {
  if (!Array.isArray(kinds)) {
    throw new ComputeError('INVALID_INPUT', 'kinds must be an array of work kinds', { details: { path: ['kinds'] } });
  }
  const checked = kinds.map((kind, i) => requireText(kind, ['kinds', i], { max: 512, name: 'work kind' }));
  if (!Number.isInteger(shards) || shards < 1 || shards > 4096) {
    throw new ComputeError('INVALID_INPUT', 'shards must be a whole number from 1 to 4096', {
      details: { path: ['shards'] },
    });
  }
  // The two parts touch disjoint rows, so one statement (one snapshot) does both.
  await sql.query(
    `WITH dropped AS (DELETE FROM agent_session_wakes WHERE NOT (kind = ANY($1::text[])))
     INSERT INTO agent_session_wakes (kind, shards) SELECT DISTINCT unnest($1::text[]), $2::int
     ON CONFLICT (kind) DO UPDATE SET shards = EXCLUDED.shards WHERE agent_session_wakes.shards <> EXCLUDED.shards`,
    [checked, shards],
  );
}

/**
 * The CTE (named `woken`) that queues an urgent wake, due now, of every recorded kind keyed by the node `nodeParam`,
 * and the expression of their notifications' payloads, for `openAgentSession`'s insert (which sends them itself, at its
 * commit: `notifyInStatementSql`).
 *
 * @example
 * ```ts
 * const wake = sessionWakeSql('$2', '$5');
 * await tx.query(`WITH opened AS (INSERT … RETURNING *) ${wake.cte} SELECT opened.*, ${wake.payloads} FROM opened`, params);
 * ```
 */
export function sessionWakeSql(nodeParam: string, nowParam: string): { cte: string; payloads: string } {
  return shardedWakeSql('woken', `SELECT k.kind, ${nodeParam}::text, k.shards FROM agent_session_wakes k`, nowParam);
}
