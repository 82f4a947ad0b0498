import { requireText } from '../checks/checks';
import { ComputeError } from '../errors';
import { newId } from '../ids';
import type { SqlExecutor } from '../sql/executor';
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
export const DEFAULT_SESSION_STALE_AFTER_MS = 60_000;

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

function staleBefore(freshness: SessionFreshness): Date {
  const { now } = freshness;
  if (!(now instanceof Date) || Number.isNaN(now.getTime())) {
    throw new ComputeError('INVALID_INPUT', 'now must be a valid Date', { details: { path: ['now'] } });
  }
  const staleAfterMs = freshness.staleAfterMs ?? DEFAULT_SESSION_STALE_AFTER_MS;
  if (!Number.isFinite(staleAfterMs) || staleAfterMs <= 0) {
    throw new ComputeError('INVALID_INPUT', 'staleAfterMs must be positive', { details: { path: ['staleAfterMs'] } });
  }
  return new Date(now.getTime() - staleAfterMs);
}

/**
 * Opens a session for an agent and closes the node's previous open one, under a lock on the node row so two opens of
 * one node never both stay open. An unknown node is NOT_FOUND; a role outside {@link AGENT_ROLES} or an empty boot id
 * is INVALID_INPUT with the path.
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
    const node = await inner.query('SELECT id FROM nodes WHERE id = $1 FOR UPDATE', [nodeId]);
    if (node.rowCount === 0) {
      throw new ComputeError('NOT_FOUND', `node ${nodeId} not found`, { details: { path: ['nodeId'] } });
    }
    const now = clock.now();
    await inner.query('UPDATE agent_sessions SET closed_at = $2 WHERE node_id = $1 AND closed_at IS NULL', [
      nodeId,
      now,
    ]);
    const { rows } = await inner.query<SessionRow>(
      `INSERT INTO agent_sessions (id, node_id, role, boot_id, connected_at, last_seen_at)
       VALUES ($1, $2, $3, $4, $5, $5) RETURNING *`,
      [newId('ses'), nodeId, input.role, bootId, now],
    );
    return toSession(rows[0] as SessionRow);
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
 * @example
 * ```ts
 * await touchAgentSession(tx, { sessionId: session.id, clock });
 * ```
 */
export async function touchAgentSession(tx: SqlExecutor, ref: AgentSessionRef): Promise<AgentSession> {
  const sessionId = requireText(ref?.sessionId, ['sessionId']);
  const clock = requireClock(ref.clock);
  const { rows } = await tx.query<SessionRow>(
    'UPDATE agent_sessions SET last_seen_at = GREATEST(last_seen_at, $2) WHERE id = $1 AND closed_at IS NULL RETURNING *',
    [sessionId, clock.now()],
  );
  if (rows[0]) return toSession(rows[0]);
  const existing = await sessionById(tx, sessionId);
  throw new ComputeError('INVALID_STATE', `agent session ${sessionId} is closed`, {
    details: { reason: 'session-closed', closedAt: existing.closedAt?.toISOString() },
  });
}

/**
 * Closes a session; closing a closed session returns it unchanged.
 *
 * @example
 * ```ts
 * await closeAgentSession(tx, { sessionId: session.id, clock });
 * ```
 */
export async function closeAgentSession(tx: SqlExecutor, ref: AgentSessionRef): Promise<AgentSession> {
  const sessionId = requireText(ref?.sessionId, ['sessionId']);
  const clock = requireClock(ref.clock);
  const { rows } = await tx.query<SessionRow>(
    'UPDATE agent_sessions SET closed_at = $2 WHERE id = $1 AND closed_at IS NULL RETURNING *',
    [sessionId, clock.now()],
  );
  return rows[0] ? toSession(rows[0]) : sessionById(tx, sessionId);
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
 * The site agents (nodes of kind `site-agent`) of a site with a connected session, most recently seen first.
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
    `SELECT s.*, n.name FROM nodes n JOIN agent_sessions s ON s.node_id = n.id
     WHERE n.site_id = $1 AND n.kind = 'site-agent' AND s.closed_at IS NULL AND s.last_seen_at > $2
     ORDER BY s.last_seen_at DESC, n.id`,
    [siteId, staleBefore(freshness)],
  );
  return rows.map((row) => ({
    nodeId: row.node_id,
    ...(row.name === null ? {} : { name: row.name }),
    session: toSession(row),
  }));
}
