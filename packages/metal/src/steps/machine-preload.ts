import type { Json, Labels } from '@better-compute/core';
import {
  connectedSiteAgentAtSql,
  currentAgentSessionAtSql,
  DEFAULT_SESSION_STALE_AFTER_MS,
} from '@better-compute/core/kernel';
import { nodeColumnSql } from '@better-compute/core/nodes';
import type { FollowingWorkflow, StepContext, WorkflowPreload } from '@better-compute/provision';

/**
 * The id of metal's workflow preload: what its steps' runs find in `ctx.preloads.reads`.
 *
 * @example
 * ```ts
 * const machine = ctx.preloads?.reads[METAL_MACHINE_PRELOAD_ID];
 * ```
 */
export const METAL_MACHINE_PRELOAD_ID = 'metal.machine';

/** The node as `inspect.collect`'s inventory write starts from it: labels, facts and the row's version (`xmin`). */
export interface PreloadedNodeVersion {
  labels: Labels | null;
  facts: Record<string, Json> | null;
  version: string;
}

/** What the claim read of a workflow's machine for metal's steps (see {@link metalMachinePreload}). */
export interface PreloadedMachine {
  nodeId: string;
  tenantId: string;
  siteId: string;
  bmcAddress: string;
  bmcDriver: string;
  bmcCredentialRef: unknown;
  addresses: string[] | null;
  drivers: Record<string, Json> | null;
  workflowStartedAt: string | null;
  /** Left out (absent) by a write with an earlier step's result that cannot know them (see `inspect.collect`). */
  macs?: string[] | null;
  /** The site agent a first command would go to (the boot-lease holder first), null when none is connected. */
  connectedAgentId: string | null;
  /** Every site agent of the machine's site, with its tenant. */
  siteAgents: Record<string, string> | null;
  session: { bootId: string | null; role: string | null; connectedAt: string } | null;
  /** Read only while `inspect.collect` runs: its write starts from it. */
  node?: PreloadedNodeVersion | null;
  /** What the lifecycle decides a workflow's end on, for metal's end write (see `metalEndWrite`). */
  lifecycle?: PreloadedLifecycle;
}

/** The machine's lifecycle columns and its row's version (`xmin`), as the claim read them. */
export interface PreloadedLifecycle {
  state: string | null;
  phase: string | null;
  enrolling: boolean;
  holdAfter: string | null;
  held: boolean;
  workflowId: string | null;
  deployRequest: Json | null;
  version: string;
}

/**
 * metal's workflow preload (provision's `WorkflowPreload`): the worker's claim reads, with the workflow, what metal's
 * relaying steps read at the start of a run (the machine's row, MACs, the profile's drivers, when the workflow
 * started, where a first command would go, the site's agents and their tenants, the machine's agent session, and the
 * node's version while `inspect.collect` runs), so a pass on a command's result goes from the claim to its next
 * command without a read; and the machine's lifecycle columns with its row's version, so the pass that ends the
 * workflow moves the machine in the same statement (`metalEndWrite`). Sessions are judged against the claim's now,
 * as `currentAgentSession` would.
 *
 * @example
 * ```ts
 * const module = { id: 'metal', extensions: [...metalSteps, metalBmcTarget, metalMachinePreload] };
 * ```
 */
export const metalMachinePreload: WorkflowPreload = Object.freeze({
  extension: 'workflow-preload' as const,
  id: METAL_MACHINE_PRELOAD_ID,
  sql: ({ workflow, now }: { workflow: string; now: string }) => {
    const stale = `(${now} - interval '${DEFAULT_SESSION_STALE_AFTER_MS} milliseconds')`;
    return `(SELECT json_build_object(
      'nodeId', m.node_id, 'tenantId', m.tenant_id, 'siteId', m.site_id, 'bmcAddress', m.bmc_address,
      'bmcDriver', m.bmc_driver, 'bmcCredentialRef', m.bmc_credential_ref, 'addresses', m.addresses,
      'drivers', ${workflow}.document->'drivers',
      'workflowStartedAt', COALESCE(${workflow}.started_at, ${workflow}.created_at),
      'macs', ARRAY(SELECT x.mac FROM metal_macs x WHERE x.node_id = m.node_id ORDER BY x.mac),
      'connectedAgentId', (${connectedSiteAgentAtSql('m.site_id', stale)}),
      'siteAgents', (SELECT json_object_agg(a.id, a.tenant_id) FROM nodes a
        WHERE a.site_id = m.site_id AND a.kind = 'site-agent'),
      'session', (${currentAgentSessionAtSql('m.node_id', stale, "json_build_object('bootId', s.boot_id, 'role', s.role, 'connectedAt', s.connected_at)")}),
      'node', CASE WHEN EXISTS (SELECT 1 FROM workflow_steps ws WHERE ws.workflow_id = ${workflow}.id
          AND ws.state = 'running' AND ws.action = 'inspect.collect')
        THEN (SELECT json_build_object('labels', n.labels, 'facts', n.facts, 'version', n.xmin::text)
          FROM nodes n WHERE n.id = m.node_id) END,
      'lifecycle', json_build_object(
        'state', (SELECT ${nodeColumnSql('provisionState', 'pn')} FROM nodes pn WHERE pn.id = m.node_id),
        'phase', m.phase, 'enrolling', m.enrolling, 'holdAfter', m.hold_after, 'held', m.held,
        'workflowId', m.workflow_id, 'deployRequest', m.deploy_request, 'version', m.xmin::text))
    FROM metal_machines m WHERE m.node_id = ${workflow}.node_id)`;
  },
  // The next phase's workflow, started by metal's end write in the statement that ends this one: the machine, its
  // site and session as the claim read them (that statement changes none of them), that workflow's drivers and start;
  // no inventory base (only `inspect.collect`'s run has one) and no lifecycle (the statement moves it), so an end of
  // that workflow in the same pass is left to the reconciler.
  following: (value: Json, next: FollowingWorkflow): Json | undefined => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
    const { lifecycle: _moved, ...machine } = value as Record<string, Json>;
    if (machine.nodeId !== next.nodeId) return undefined;
    const drivers = (next.document as { drivers?: Json }).drivers ?? null;
    return { ...machine, drivers, workflowStartedAt: next.startedAt.toISOString(), node: null };
  },
});

/**
 * What the claim read of the run's machine, when it read it for this node: undefined otherwise (no preload, another
 * node, a machine metal does not know), and the step reads for itself.
 *
 * @example
 * ```ts
 * const machine = preloadedMachine(ctx, node.id) ?? (await readMachine(ctx));
 * ```
 */
export function preloadedMachine(ctx: StepContext, nodeId: string): PreloadedMachine | undefined {
  const value = ctx.preloads?.reads[METAL_MACHINE_PRELOAD_ID];
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const machine = value as unknown as PreloadedMachine;
  if (machine.nodeId !== nodeId || typeof machine.siteId !== 'string' || typeof machine.bmcAddress !== 'string') {
    return undefined;
  }
  return machine;
}
