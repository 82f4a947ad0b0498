import type { Clock, SqlExecutor } from '@better-compute/core';
import { type ConnectedSiteAgent, connectedSiteAgents, systemClock } from '@better-compute/core/kernel';
import { getNode } from '@better-compute/core/nodes';

/**
 * A connected site agent of the node's site, or undefined when none is connected or the node has no site; then throw
 * `stepNotReady` and wait for one. The site's boot-lease holder (core's `site_boot_leases`, the agent that answers
 * PXE/DHCP there) when it is connected, else the most recently seen; two statements either way.
 *
 * "Connected" is judged at `clock.now()`: pass `ctx.clock` when the compute runs on another clock than the system's
 * (a fake clock in tests), or a session stamped by that clock may look stale or fresh when it is not.
 *
 * @example
 * ```ts
 * const agent = await siteAgentFor(ctx.sql, ctx.node!.id, ctx.clock);
 * if (!agent) throw stepNotReady(2_000);
 * ```
 */
export async function siteAgentFor(
  sql: SqlExecutor,
  nodeId: string,
  clock: Clock = systemClock,
): Promise<ConnectedSiteAgent | undefined> {
  const siteId = (await getNode(sql, nodeId))?.siteId;
  if (!siteId) return undefined;
  const [agent] = await connectedSiteAgents(sql, siteId, { now: clock.now() });
  return agent;
}
