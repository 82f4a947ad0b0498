import { isComputeError } from '../errors';
import { getNode, type NodeRow } from '../nodes/node-repository';
import type { SqlExecutor } from '../sql/executor';
import { resourceNotFound } from './authorize';
import type { ResourceRef } from './types';

/** The resource type of a node, the one the workflows and metal groups are decided on. */
export const COMPUTE_NODE = 'compute-node';

/** The resource type of a whole tenant, for methods that are not about one row. */
export const COMPUTE_TENANT = 'compute-tenant';

/**
 * Resolves `{ tenantId, nodeId }` from a method's input to the node's {@link ResourceRef} (`compute-node`, with its
 * `kind`). A node that does not exist and a node of another tenant are the same NOT_FOUND, `details.path` `['nodeId']`.
 *
 * @example
 * ```ts
 * resource: (input, ctx) => resolveNodeResource(ctx.sql, input.tenantId, input.nodeId),
 * ```
 */
export async function resolveNodeResource(sql: SqlExecutor, tenantId: string, nodeId: string): Promise<ResourceRef> {
  const path = ['nodeId'];
  if (typeof tenantId !== 'string' || typeof nodeId !== 'string') throw resourceNotFound(COMPUTE_NODE, path);
  let node: NodeRow | undefined;
  try {
    node = await getNode(sql, nodeId, { tenantId });
  } catch (error) {
    // An id or tenant no node could have (empty, too long, not storable) names no node either.
    if (isComputeError(error, 'INVALID_INPUT')) throw resourceNotFound(COMPUTE_NODE, path);
    throw error;
  }
  if (!node) throw resourceNotFound(COMPUTE_NODE, path);
  return { type: COMPUTE_NODE, tenantId, id: nodeId, kind: node.kind, path };
}

/**
 * Resolves a tenant named by a method's input to its {@link ResourceRef} (`compute-tenant`), for methods decided on a
 * whole tenant (listing, creating). A missing tenant is NOT_FOUND, `details.path` `['tenantId']`.
 *
 * @example
 * ```ts
 * resource: (input, ctx) => resolveTenantResource(ctx.sql, input.tenantId),
 * ```
 */
export async function resolveTenantResource(sql: SqlExecutor, tenantId: string): Promise<ResourceRef> {
  const path = ['tenantId'];
  if (typeof tenantId !== 'string') throw resourceNotFound(COMPUTE_TENANT, path);
  const { rowCount } = await sql.query('SELECT 1 FROM tenants WHERE id = $1', [tenantId]);
  if (rowCount === 0) throw resourceNotFound(COMPUTE_TENANT, path);
  return { type: COMPUTE_TENANT, tenantId, id: tenantId, path };
}
