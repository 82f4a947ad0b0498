import { requireText } from '../checks/checks';
import type { SqlExecutor } from '../sql/executor';
import { DEFAULT_SESSION_STALE_AFTER_MS, staleBefore } from './freshness';
import type { BootLease, SessionFreshness } from './types';

interface BootLeaseRow {
  site_id: string;
  holder_node_id: string;
  session_id: string;
  acquired_at: Date;
}

function toBootLease(row: BootLeaseRow): BootLease {
  return { siteId: row.site_id, nodeId: row.holder_node_id, sessionId: row.session_id, acquiredAt: row.acquired_at };
}

// Gives the lease to the best connected site agent when its session is not live: a `site` session of a site agent of
// the site, open and seen within the default freshness; sessions of other nodes than the former holder first (the
// lease never moves back while another agent is connected), then the longest connected. `$3` is a session that counts
// as ended even if it looks live (one that touched after it had gone stale). With no candidate, the row keeps its
// former holder and is not live.
const SETTLE_SQL = `
WITH lease AS (
  SELECT l.holder_node_id, h.id IS NOT NULL AS live
  FROM site_boot_leases l
  LEFT JOIN agent_sessions h ON h.id = l.session_id AND h.closed_at IS NULL AND h.last_seen_at > $2
    AND h.id IS DISTINCT FROM $3::text
  WHERE l.site_id = $1
), pick AS (
  SELECT s.node_id, s.id
  FROM nodes n JOIN agent_sessions s ON s.node_id = n.id
  WHERE n.site_id = $1 AND n.kind = 'site-agent' AND s.role = 'site' AND s.closed_at IS NULL AND s.last_seen_at > $2
    AND NOT EXISTS (SELECT 1 FROM lease WHERE live)
  ORDER BY (s.id = $3::text) IS TRUE, (n.id = (SELECT holder_node_id FROM lease)) IS TRUE, s.connected_at, s.id
  LIMIT 1
)
INSERT INTO site_boot_leases (site_id, holder_node_id, session_id, acquired_at)
SELECT $1, node_id, id, $4 FROM pick
ON CONFLICT (site_id) DO UPDATE SET holder_node_id = EXCLUDED.holder_node_id, session_id = EXCLUDED.session_id,
  acquired_at = EXCLUDED.acquired_at`;

/**
 * Makes sure the site's boot lease has a live holder when a site agent can hold it, in the caller's transaction. The
 * site row is locked first (`FOR NO KEY UPDATE`, which foreign-key checks do not wait on), so two agents settling at
 * once decide one after the other, each on what the other committed: one holder. Costs two statements; called only
 * when a site agent's session opens, closes while holding the lease, or touches while the lease is not live.
 */
export async function settleBootLease(
  tx: SqlExecutor,
  siteId: string,
  now: Date,
  endedSessionId?: string,
): Promise<void> {
  await tx.query('SELECT id FROM sites WHERE id = $1 FOR NO KEY UPDATE', [siteId]);
  await tx.query(SETTLE_SQL, [
    siteId,
    new Date(now.getTime() - DEFAULT_SESSION_STALE_AFTER_MS),
    endedSessionId ?? null,
    now,
  ]);
}

/**
 * The site's boot lease when its holder is connected (its session open and seen within `staleAfterMs` of `now`);
 * undefined while no site agent holds it. The holder is also the first of {@link connectedSiteAgents}.
 *
 * @example
 * ```ts
 * const lease = await bootLeaseHolder(db, siteId, { now: clock.now() });
 * if (lease?.nodeId === siteAgentId) answerPxe();
 * ```
 */
export async function bootLeaseHolder(
  sql: SqlExecutor,
  siteId: string,
  freshness: SessionFreshness,
): Promise<BootLease | undefined> {
  requireText(siteId, ['siteId']);
  const { rows } = await sql.query<BootLeaseRow>(
    `SELECT l.* FROM site_boot_leases l JOIN agent_sessions s ON s.id = l.session_id
     WHERE l.site_id = $1 AND s.closed_at IS NULL AND s.last_seen_at > $2`,
    [siteId, staleBefore(freshness)],
  );
  return rows[0] ? toBootLease(rows[0]) : undefined;
}
