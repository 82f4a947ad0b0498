import { type Clock, ComputeError, type SqlExecutor } from '@better-compute/core';
import { createNode, getNode } from '@better-compute/core/nodes';
import type { HardwareClaims } from './claims';
import type { JoinTokenRow } from './join-tokens';

/** What an attestor decides: the node an accepted join becomes. */
export interface AttestedNode {
  nodeId: string;
  tenantId: string;
  siteId: string | null;
}

/** What an attestor is given: the (already checked) token row, the agent's claims and the clock. */
export interface AttestorInput {
  token: JoinTokenRow;
  claims: HardwareClaims;
  clock: Clock;
}

/** Turns an accepted join into a node identity, inside the join's transaction; throws to refuse. */
export type Attestor = (tx: SqlExecutor, input: AttestorInput) => Promise<AttestedNode>;

/** Finds the node a `provisioned` token was minted for, by the token's id. */
export type ProvisionedLookup = (sql: SqlExecutor, joinTokenId: string) => Promise<string | undefined>;

function attestationFailed(message: string): ComputeError {
  return new ComputeError('PERMISSION_DENIED', message, { details: { path: ['token'], reason: 'attestation-failed' } });
}

async function bindNode(tx: SqlExecutor, token: JoinTokenRow, nodeId: string, kind: string): Promise<AttestedNode> {
  const node = await getNode(tx, nodeId);
  if (!node || node.tenantId !== token.tenant_id || node.kind !== kind) {
    throw attestationFailed(`the token's node is not a ${kind} of its tenant`);
  }
  if (token.site_id && node.siteId !== token.site_id) throw attestationFailed("the token's node is not in its site");
  return { nodeId: node.id, tenantId: node.tenantId, siteId: node.siteId };
}

async function enrollNode(
  tx: SqlExecutor,
  token: JoinTokenRow,
  kind: string,
  state: string | null,
  clock: Clock,
): Promise<AttestedNode> {
  const node = await createNode(
    tx,
    { tenantId: token.tenant_id, siteId: token.site_id, poolId: token.pool_id, kind, provisionState: state },
    clock.now(),
  );
  return { nodeId: node.id, tenantId: node.tenantId, siteId: node.siteId };
}

/**
 * The `discovery` attestor: every accepted join creates a new machine (`kind 'machine'`, `provision_state
 * 'enrolling'`) in the token's tenant, site and pool.
 *
 * @example
 * ```ts
 * pki({ key, attestors: { discovery: discoveryAttestor() } });
 * ```
 */
export function discoveryAttestor(): Attestor {
  return (tx, { token, clock }) => enrollNode(tx, token, 'machine', 'enrolling', clock);
}

/**
 * The `node` attestor: binds the pre-registered machine the token names (`nodeId` at issue), which must be in the
 * token's tenant (and site, when the token has one).
 *
 * @example
 * ```ts
 * pki({ key, attestors: { node: nodeAttestor() } });
 * ```
 */
export function nodeAttestor(): Attestor {
  return (tx, { token }) => {
    if (!token.node_id) return Promise.reject(attestationFailed('the node token names no node'));
    return bindNode(tx, token, token.node_id, 'machine');
  };
}

/**
 * The `site` attestor: binds the site agent the token names, or creates a new one (`kind 'site-agent'`) in the
 * token's site.
 *
 * @example
 * ```ts
 * pki({ key, attestors: { site: siteAttestor() } });
 * ```
 */
export function siteAttestor(): Attestor {
  return (tx, { token, clock }) =>
    token.node_id ? bindNode(tx, token, token.node_id, 'site-agent') : enrollNode(tx, token, 'site-agent', null, clock);
}

/**
 * The default {@link ProvisionedLookup}: the node of the workflow whose step result has `joinTokenId`, read from the
 * provision engine's `workflow_steps` (its `node_id`, or its workflow's `workflows.node_id`) only when those tables
 * and columns exist; otherwise undefined.
 *
 * @example
 * ```ts
 * const nodeId = await workflowStepsLookup(sql, 'tok_01k…');
 * ```
 */
export const workflowStepsLookup: ProvisionedLookup = async (sql, joinTokenId) => {
  const { rows: columns } = await sql.query<{ table_name: string; column_name: string }>(
    `SELECT table_name, column_name FROM information_schema.columns
     WHERE table_schema = current_schema() AND table_name IN ('workflow_steps', 'workflows')`,
  );
  const has = (table: string, column: string) =>
    columns.some((c) => c.table_name === table && c.column_name === column);
  if (!has('workflow_steps', 'result')) return undefined;
  let query: string | undefined;
  if (has('workflow_steps', 'node_id')) {
    query = "SELECT node_id FROM workflow_steps WHERE result->>'joinTokenId' = $1 AND node_id IS NOT NULL LIMIT 1";
  } else if (has('workflow_steps', 'workflow_id') && has('workflows', 'id') && has('workflows', 'node_id')) {
    query = `SELECT w.node_id FROM workflow_steps s JOIN workflows w ON w.id = s.workflow_id
             WHERE s.result->>'joinTokenId' = $1 AND w.node_id IS NOT NULL LIMIT 1`;
  }
  if (!query) return undefined;
  const { rows } = await sql.query<{ node_id: string }>(query, [joinTokenId]);
  return rows[0]?.node_id;
};

/**
 * The `provisioned` attestor: maps the token back to the node it was minted for, so an installed OS re-keys the same
 * node. The node recorded on the token at issue (`nodeId`) wins; otherwise `lookup` (by default
 * {@link workflowStepsLookup}: the step result's `joinTokenId`).
 *
 * @example
 * ```ts
 * pki({ key, attestors: { provisioned: provisionedTargetResolver(async (sql, id) => myLookup(sql, id)) } });
 * ```
 */
export function provisionedTargetResolver(lookup: ProvisionedLookup = workflowStepsLookup): Attestor {
  return async (tx, { token }) => {
    const nodeId = token.node_id ?? (await lookup(tx, token.id));
    if (!nodeId) throw attestationFailed('no node was provisioned with this token');
    return bindNode(tx, token, nodeId, 'machine');
  };
}
