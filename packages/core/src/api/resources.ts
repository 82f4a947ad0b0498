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
  const { rows } = await sql.query<{ kind: string }>('SELECT kind FROM nodes WHERE id = $1 AND tenant_id = $2', [
    nodeId,
    tenantId,
  ]);
  const row = rows[0];
  if (!row) throw resourceNotFound(COMPUTE_NODE, path);
  return { type: COMPUTE_NODE, tenantId, id: nodeId, kind: row.kind, path };
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
