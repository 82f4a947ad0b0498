import { ComputeError, type ErrorPath } from '../errors';
import { grantsPermission, ROOT_TENANT_ID } from './permissions';
import type { Principal, ResourceRef } from './types';

/**
 * The NOT_FOUND for a resource: one message per resource type and the input field that named it, so a resource of
 * another tenant and a missing one give the same error body.
 *
 * @example
 * ```ts
 * throw resourceNotFound('compute-node', ['nodeId']);
 * // ComputeError NOT_FOUND 'compute-node not found', details { path: ['nodeId'] }
 * ```
 */
export function resourceNotFound(type: string, path?: ErrorPath): ComputeError {
  return new ComputeError('NOT_FOUND', `${type} not found`, { details: path === undefined ? {} : { path } });
}

/**
 * Decides a call: the principal's tenant must be the resource's tenant, unless it is `root`, which acts on every
 * tenant; a resource of another tenant is NOT_FOUND exactly as a missing one ({@link resourceNotFound}). On an own
 * resource, a permission the grants do not cover is PERMISSION_DENIED.
 *
 * @example
 * ```ts
 * authorize(principal, 'compute:workflows:manage', await resolveNodeResource(sql, tenantId, nodeId));
 * ```
 */
export function authorize(principal: Principal, permission: string, resource: ResourceRef): void {
  if (principal.tenantId !== ROOT_TENANT_ID && principal.tenantId !== resource.tenantId) {
    throw resourceNotFound(resource.type, resource.path);
  }
  if (!grantsPermission(principal.permissions, permission)) {
    throw new ComputeError('PERMISSION_DENIED', `the credential lacks the permission ${permission}`, {
      details: { permission },
    });
  }
}
