import { requireText } from '../checks/checks';
import { ComputeError } from '../errors';
import { newId } from '../ids';
import type { SqlExecutor } from '../sql/executor';
import { notifyInStatementSql } from '../work/work-queue';
import { settleBootLease } from './boot-leases';
import { DEFAULT_SESSION_STALE_AFTER_MS, staleBefore } from './freshness';
import { sessionWakeSql } from './session-wakes';
import {
  AGENT_ROLES,
  type AgentRole,
  type AgentSession,
  type AgentSessionRef,
  type ConnectedSiteAgent,
  type OpenAgentSessionInput,
  type SessionFreshness,
} from './types';

/** How long a session stays connected without a touch, unless the caller says otherwise. */
export { DEFAULT_SESSION_STALE_AFTER_MS };

interface SessionRow {
  id: string;
  node_id: string;
  role: AgentRole;
  boot_id: string;
  connected_at: Date;
  last_seen_at: Date;
  closed_at: Date | null;
}

function toSession(row: SessionRow): AgentSession {
  const session: AgentSession = {
    id: row.id,
    nodeId: row.node_id,
    role: row.role,
    bootId: row.boot_id,
    connectedAt: row.connected_at,
    lastSeenAt: row.last_seen_at,
  };
  if (row.closed_at !== null) session.closedAt = row.closed_at;
  return session;
}

function requireClock(clock: unknown): { now(): Date } {
  if (typeof (clock as { now?: unknown } | undefined)?.now !== 'function') {
    throw new ComputeError('INVALID_INPUT', 'clock must be a Clock', { details: { path: ['clock'] } });
  }
  return clock as { now(): Date };
}

/**
 * Opens a session for an agent and closes the node's previous open one, under a lock on the node row so two opens of
 * one node never both stay open (`FOR NO KEY UPDATE`: a boot lease given to this node by another transaction, which
 * holds its site's lock, checks its foreign key on the row without waiting, so the two cannot deadlock). An unknown
 * node is NOT_FOUND; a role outside {@link AGENT_ROLES} or an empty boot id is INVALID_INPUT with the path.
 *
 * For a site agent (a node of kind `site-agent` with a site), the site's boot lease is settled in the same
 * transaction: a `site` session takes it when no connected site agent holds it, and when the node's previous session
 * held it, it moves to another connected site agent of the site first (it does not stay with the node because the
 * node came back).
 *
 * The insert queues, in the same statement, an urgent wake due now of every work kind the modules declared in
 * `wakeOnAgentSession` (as `betterCompute` recorded them), keyed by the node id, with the NOTIFY that wakes a worker at
 * commit: a workflow waiting for this agent runs at once instead of at its next poll, and a rolled-back open wakes
 * nothing.
 *
 * @example
 * ```ts
 * const session = await db.transaction((tx) => openAgentSession(tx, { nodeId, role: 'ramdisk', bootId, clock }));
 * ```
 */
export async function openAgentSession(tx: SqlExecutor, input: OpenAgentSessionInput): Promise<AgentSession> {
  const nodeId = requireText(input?.nodeId, ['nodeId']);
  const clock = requireClock(input.clock);
  if (!(AGENT_ROLES as readonly unknown[]).includes(input.role)) {
    throw new ComputeError('INVALID_INPUT', `role must be one of ${AGENT_ROLES.join(', ')}`, {
      details: { path: ['role'] },
    });
  }
  const bootId = requireText(input.bootId, ['bootId']);
  return tx.transaction(async (inner) => {
    const node = await inner.query<{ kind: string; site_id: string | null }>(
      'SELECT kind, site_id FROM nodes WHERE id = $1 FOR NO KEY UPDATE',
      [nodeId],
    );
    const row = node.rows[0];
    if (!row) {
      throw new ComputeError('NOT_FOUND', `node ${nodeId} not found`, { details: { path: ['nodeId'] } });
    }
    const now = clock.now();
    await inner.query('UPDATE agent_sessions SET closed_at = $2 WHERE node_id = $1 AND closed_at IS NULL', [
      nodeId,
      now,
    ]);
    // The insert also wakes whatever waits for this node's agent (the modules' wakeOnAgentSession), so a workflow
    // waiting for it runs now rather than at its next poll, and only if the session commits.
    const wake = sessionWakeSql('$2', '$5');
    const { rows } = await inner.query<SessionRow & { woken: unknown }>(
      `WITH opened AS (INSERT INTO agent_sessions (id, node_id, role, boot_id, connected_at, last_seen_at)
       VALUES ($1, $2, $3, $4, $5, $5) RETURNING *) ${wake.cte}
       SELECT opened.*, ${notifyInStatementSql(wake.payloads)} AS woken FROM opened`,
      [newId('ses'), nodeId, input.role, bootId, now],
    );
    if (row.kind === 'site-agent' && row.site_id !== null) await settleBootLease(inner, row.site_id, now);
    const { woken: _woken, ...session } = rows[0] as SessionRow & { woken: unknown };
    return toSession(session as SessionRow);
  });
}

async function sessionById(sql: SqlExecutor, sessionId: string): Promise<AgentSession> {
  const { rows } = await sql.query<SessionRow>('SELECT * FROM agent_sessions WHERE id = $1', [sessionId]);
  if (!rows[0]) {
    throw new ComputeError('NOT_FOUND', `agent session ${sessionId} not found`, { details: { path: ['sessionId'] } });
  }
  return toSession(rows[0]);
}

/**
 * Records that the agent was seen now. A closed session is INVALID_STATE (`reason: 'session-closed'`): the agent must
 * open a new one.
 *
 * One statement, which also tells whether the touching session is a site agent's `site` session whose site's boot
 * lease had no live holder (seen before this touch, by the default freshness); only then is the lease settled: the
 * lease of a holder that had gone stale moves to another connected site agent, or one is given to a vacant site.
 *
 * @example
 * ```ts
 * await touchAgentSession(tx, { sessionId: session.id, clock });
 * ```
 */
export async function touchAgentSession(tx: SqlExecutor, ref: AgentSessionRef): Promise<AgentSession> {
  const sessionId = requireText(ref?.sessionId, ['sessionId']);
  const clock = requireClock(ref.clock);
  const now = clock.now();
  // The subqueries read the rows as they were before this statement, the touching session's last touch included.
  const { rows } = await tx.query<SessionRow & { lease_site_id: string | null; lease_held: boolean }>(
    `UPDATE agent_sessions s SET last_seen_at = GREATEST(s.last_seen_at, $2) WHERE s.id = $1 AND s.closed_at IS NULL
     RETURNING s.*, CASE WHEN s.role = 'site' THEN (
       SELECT n.site_id FROM nodes n WHERE n.id = s.node_id AND n.kind = 'site-agent' AND NOT EXISTS (
         SELECT 1 FROM site_boot_leases l JOIN agent_sessions h ON h.id = l.session_id
         WHERE l.site_id = n.site_id AND h.closed_at IS NULL AND h.last_seen_at > $3)
     ) END AS lease_site_id,
     s.role = 'site' AND EXISTS (SELECT 1 FROM site_boot_leases l WHERE l.session_id = s.id) AS lease_held`,
    [sessionId, now, new Date(now.getTime() - DEFAULT_SESSION_STALE_AFTER_MS)],
  );
  const touched = rows[0];
  if (touched) {
    if (touched.lease_site_id !== null) {
      await settleBootLease(tx, touched.lease_site_id, now, touched.lease_held ? touched.id : undefined);
    }
    return toSession(touched);
  }
  const existing = await sessionById(tx, sessionId);
  throw new ComputeError('INVALID_STATE', `agent session ${sessionId} is closed`, {
    details: { reason: 'session-closed', closedAt: existing.closedAt?.toISOString() },
  });
}

/**
 * Closes a session; closing a closed session returns it unchanged. When the session held its site's boot lease, the
 * lease moves to another connected site agent of the site in the same transaction (or waits for one to connect).
 *
 * @example
 * ```ts
 * await closeAgentSession(tx, { sessionId: session.id, clock });
 * ```
 */
export async function closeAgentSession(tx: SqlExecutor, ref: AgentSessionRef): Promise<AgentSession> {
  const sessionId = requireText(ref?.sessionId, ['sessionId']);
  const clock = requireClock(ref.clock);
  const now = clock.now();
  const { rows } = await tx.query<SessionRow & { lease_site_id: string | null }>(
    `UPDATE agent_sessions s SET closed_at = $2 WHERE s.id = $1 AND s.closed_at IS NULL
     RETURNING s.*, (SELECT l.site_id FROM site_boot_leases l WHERE l.session_id = s.id) AS lease_site_id`,
    [sessionId, now],
  );
  const closed = rows[0];
  if (!closed) return sessionById(tx, sessionId);
  if (closed.lease_site_id !== null) await settleBootLease(tx, closed.lease_site_id, now);
  return toSession(closed);
}

/**
 * The node's connected session: open and seen within `staleAfterMs` of `now`; undefined when there is none.
 *
 * @example
 * ```ts
 * const session = await currentAgentSession(db, nodeId, { now: clock.now() });
 * if (session?.bootId !== recordedBootId) rejoined();
 * ```
 */
export async function currentAgentSession(
  sql: SqlExecutor,
  nodeId: string,
  freshness: SessionFreshness,
): Promise<AgentSession | undefined> {
  requireText(nodeId, ['nodeId']);
  const { rows } = await sql.query<SessionRow>(
    `SELECT * FROM agent_sessions WHERE node_id = $1 AND closed_at IS NULL AND last_seen_at > $2
     ORDER BY connected_at DESC, id DESC LIMIT 1`,
    [nodeId, staleBefore(freshness)],
  );
  return rows[0] ? toSession(rows[0]) : undefined;
}

/**
 * A query for a statement of the caller's own (a claim's preload, a plan's check): `select` (over the session as `s`)
 * of the session {@link currentAgentSession} would return for the node `node` (an SQL expression, such as a column), sessions last
 * seen at or before `staleBefore` (an SQL expression, a timestamptz) counting as gone. As a scalar subquery, NULL when
 * none is connected.
 *
 * @example
 * ```ts
 * const session = currentAgentSessionAtSql('w.node_id', `(${now} - interval '60000 milliseconds')`, 's.boot_id');
 * ```
 */
export function currentAgentSessionAtSql(node: string, staleBefore: string, select: string): string {
  return `SELECT ${select} FROM agent_sessions s
    WHERE s.node_id = ${node} AND s.closed_at IS NULL AND s.last_seen_at > ${staleBefore}
    ORDER BY s.connected_at DESC, s.id DESC LIMIT 1`;
}

// The connected site agents of the site `site` (an SQL expression), the boot-lease holder first, then the others most
// recently seen first; `stale` is the placeholder of the time before which a session counts as gone.
const connectedSiteAgentsFrom = (site: string, stale: string) =>
  `FROM nodes n JOIN agent_sessions s ON s.node_id = n.id
     LEFT JOIN site_boot_leases l ON l.site_id = n.site_id AND l.session_id = s.id
     WHERE n.site_id = ${site} AND n.kind = 'site-agent' AND s.closed_at IS NULL AND s.last_seen_at > ${stale}
     ORDER BY l.site_id IS NULL, s.last_seen_at DESC, n.id`;

/**
 * A scalar subquery for a statement of the caller's own: the node id of the site agent {@link connectedSiteAgents}
 * would list first for the site `site` (an SQL expression, such as a column), or NULL when none is connected.
 * `bind` adds the freshness bound as a parameter.
 *
 * @example
 * ```ts
 * const agent = connectedSiteAgentSql('m.site_id', { now: clock.now() }, bind);
 * await sql.query(`SELECT m.*, (${agent}) AS agent_id FROM metal_machines m WHERE m.node_id = ${bind(nodeId)}`, params);
 * ```
 */
export function connectedSiteAgentSql(
  site: string,
  freshness: SessionFreshness,
  bind: (value: unknown) => string,
): string {
  return `SELECT n.id ${connectedSiteAgentsFrom(site, `${bind(staleBefore(freshness))}::timestamptz`)} LIMIT 1`;
}

/**
 * {@link connectedSiteAgentSql} with the freshness bound as an SQL expression (`staleBefore`, a timestamptz: sessions
 * last seen at or before it count as gone), for a statement whose now is itself an SQL expression (a claim's preload).
 *
 * @example
 * ```ts
 * const agent = connectedSiteAgentAtSql('m.site_id', `(${now} - interval '60000 milliseconds')`);
 * ```
 */
export function connectedSiteAgentAtSql(site: string, staleBefore: string): string {
  return `SELECT n.id ${connectedSiteAgentsFrom(site, staleBefore)} LIMIT 1`;
}

/**
 * The site agents (nodes of kind `site-agent`) of a site with a connected session: the boot-lease holder first, then
 * the others most recently seen first. One statement.
 *
 * @example
 * ```ts
 * const [agent] = await connectedSiteAgents(db, siteId, { now: clock.now() });
 * if (!agent) throw new ComputeError('NO_SITE_AGENT', `no site agent is connected at ${siteId}`);
 * ```
 */
export async function connectedSiteAgents(
  sql: SqlExecutor,
  siteId: string,
  freshness: SessionFreshness,
): Promise<ConnectedSiteAgent[]> {
  requireText(siteId, ['siteId']);
  const { rows } = await sql.query<SessionRow & { name: string | null }>(
    `SELECT s.*, n.name ${connectedSiteAgentsFrom('$1', '$2')}`,
    [siteId, staleBefore(freshness)],
  );
  return rows.map((row) => ({
    nodeId: row.node_id,
    ...(row.name === null ? {} : { name: row.name }),
    session: toSession(row),
  }));
}
