import type { Clock } from '../clock';

/**
 * The roles an agent speaks as: a node's `bcd` (`node`), a site agent (`site`), the deploy ramdisk (`ramdisk`), an
 * installed OS that rejoined (`provisioned`) and an unknown machine being discovered (`discovery`).
 *
 * @example
 * ```ts
 * AGENT_ROLES.includes('ramdisk'); // true
 * ```
 */
export const AGENT_ROLES = Object.freeze(['node', 'site', 'ramdisk', 'provisioned', 'discovery'] as const);

/** One of {@link AGENT_ROLES}. */
export type AgentRole = (typeof AGENT_ROLES)[number];

/** An agent's connection as stored: who it is, the role it speaks as and which boot it is. */
export interface AgentSession {
  id: string;
  nodeId: string;
  role: AgentRole;
  bootId: string;
  connectedAt: Date;
  lastSeenAt: Date;
  closedAt?: Date;
}

/** What opening a session takes; `clock` stamps `connectedAt` and `lastSeenAt`. */
export interface OpenAgentSessionInput {
  nodeId: string;
  role: AgentRole;
  bootId: string;
  clock: Clock;
}

/** Which session to touch or close, and the clock that stamps it. */
export interface AgentSessionRef {
  sessionId: string;
  clock: Clock;
}

/** When a session counts as connected: open, and seen within `staleAfterMs` (default 60,000) of `now`. */
export interface SessionFreshness {
  now: Date;
  staleAfterMs?: number;
}

/** A site agent with a connected session. */
export interface ConnectedSiteAgent {
  nodeId: string;
  name?: string;
  session: AgentSession;
}

/**
 * A site's boot lease: the site agent that answers PXE/DHCP there (`nodeId`), the session it holds the lease through,
 * and when it took it.
 */
export interface BootLease {
  siteId: string;
  nodeId: string;
  sessionId: string;
  acquiredAt: Date;
}
