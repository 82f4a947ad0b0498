import { type Clock, isComputeError, type Logger, type SqlDatabase } from '@better-compute/core';
import {
  type AgentRole,
  type AgentSession,
  closeAgentSession,
  openAgentSession,
  touchAgentSession,
} from '@better-compute/core/kernel';

/**
 * How often at most an authenticated call touches its node's open session (by the clock): every 15 s, a quarter of
 * core's 60 s after which a session is stale.
 *
 * @example
 * ```ts
 * clock.advance(SESSION_TOUCH_EVERY_MS); // the next call touches the session
 * ```
 */
export const SESSION_TOUCH_EVERY_MS = 15_000;

/** The agent API's view of each node's open session: opened, closed and touched through core's agent sessions. */
export interface SessionKeeper {
  open(nodeId: string, role: AgentRole, bootId: string): Promise<AgentSession>;
  /** Closes the node's open session; false when it had none. */
  close(nodeId: string): Promise<boolean>;
  /** Records that the node was seen: at most once every {@link SESSION_TOUCH_EVERY_MS} per node; never throws. */
  touch(nodeId: string): Promise<void>;
}

interface Known {
  sessionId: string | undefined;
  checkedAt: number;
}

/**
 * Keeps, per node, the id of its open session and when it was last touched, so an authenticated call costs no
 * statement for its session unless the last touch is older than {@link SESSION_TOUCH_EVERY_MS}. A node this process
 * has not seen open a session (another server did, or this one restarted) is looked up once per interval.
 *
 * @example
 * ```ts
 * const sessions = createSessionKeeper(compute.database, clock, log);
 * await sessions.open(nodeId, 'ramdisk', bootId);
 * await sessions.touch(nodeId); // no statement: touched just now
 * ```
 */
export function createSessionKeeper(database: SqlDatabase, clock: Clock, log: Logger): SessionKeeper {
  const known = new Map<string, Known>();

  async function openSessionId(nodeId: string): Promise<string | undefined> {
    const cached = known.get(nodeId);
    if (cached?.sessionId) return cached.sessionId;
    const { rows } = await database.query<{ id: string }>(
      `SELECT id FROM agent_sessions WHERE node_id = $1 AND closed_at IS NULL
       ORDER BY connected_at DESC, id DESC LIMIT 1`,
      [nodeId],
    );
    return rows[0]?.id;
  }

  return {
    async open(nodeId, role, bootId) {
      const session = await database.transaction((tx) => openAgentSession(tx, { nodeId, role, bootId, clock }));
      known.set(nodeId, { sessionId: session.id, checkedAt: clock.now().getTime() });
      return session;
    },

    async close(nodeId) {
      const sessionId = await openSessionId(nodeId);
      known.set(nodeId, { sessionId: undefined, checkedAt: clock.now().getTime() });
      if (!sessionId) return false;
      const closed = await database.transaction((tx) => closeAgentSession(tx, { sessionId, clock }));
      return closed.closedAt !== undefined;
    },

    async touch(nodeId) {
      const now = clock.now().getTime();
      const cached = known.get(nodeId);
      if (cached && now - cached.checkedAt < SESSION_TOUCH_EVERY_MS) return;
      known.set(nodeId, { sessionId: cached?.sessionId, checkedAt: now });
      try {
        const sessionId = await openSessionId(nodeId);
        if (!sessionId) {
          known.set(nodeId, { sessionId: undefined, checkedAt: now });
          return;
        }
        await database.transaction((tx) => touchAgentSession(tx, { sessionId, clock }));
        known.set(nodeId, { sessionId, checkedAt: now });
      } catch (error) {
        // A session closed elsewhere (a newer open, a close) is forgotten; the agent opens a new one.
        known.set(nodeId, { sessionId: undefined, checkedAt: now });
        if (!(isComputeError(error, 'INVALID_STATE') && error.details.reason === 'session-closed')) {
          log.warn('agent API: touching the session failed', {
            nodeId,
            error: error instanceof Error ? error.message : String(error),
          });
        }
      }
    },
  };
}
