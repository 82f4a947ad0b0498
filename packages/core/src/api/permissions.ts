import type { ApiPermission } from './types';

/**
 * The tenant whose credentials may act on every tenant.
 *
 * @example
 * ```ts
 * if (principal.tenantId === ROOT_TENANT_ID) console.log('operator credential');
 * ```
 */
export const ROOT_TENANT_ID = 'root';

const SEGMENT = '[a-z][a-z0-9-]{0,62}';
const PERMISSION = new RegExp(`^compute:${SEGMENT}:${SEGMENT}$`);
const GRANT = new RegExp(`^compute:(\\*|${SEGMENT}:(\\*|${SEGMENT}))$`);

/**
 * Whether a value is a concrete permission a method may require: `compute:<area>:<verb>`, each segment lower-case
 * letters, digits and hyphens starting with a letter. Wildcards are not permissions, only grants.
 *
 * @example
 * ```ts
 * isApiPermission('compute:workflows:read'); // true
 * isApiPermission('compute:workflows:*'); // false
 * ```
 */
export function isApiPermission(value: unknown): value is ApiPermission {
  return typeof value === 'string' && PERMISSION.test(value);
}

/**
 * Whether a value is a permission a credential may hold: a concrete permission, `compute:<area>:*` (every verb of an
 * area) or `compute:*` (everything).
 *
 * @example
 * ```ts
 * isPermissionGrant('compute:*'); // true
 * isPermissionGrant('compute:*:read'); // false
 * ```
 */
export function isPermissionGrant(value: unknown): value is string {
  return typeof value === 'string' && GRANT.test(value);
}

/**
 * Whether a set of grants covers a permission. A grant matches itself, `compute:<area>:*` matches every verb of that
 * area, and `compute:*` matches everything. Malformed grants match nothing.
 *
 * @example
 * ```ts
 * grantsPermission(['compute:workflows:*'], 'compute:workflows:manage'); // true
 * grantsPermission(['compute:workflows:read'], 'compute:workflows:manage'); // false
 * ```
 */
export function grantsPermission(grants: readonly string[], permission: string): boolean {
  if (!isApiPermission(permission)) return false;
  const area = permission.slice(0, permission.lastIndexOf(':'));
  return grants.some((grant) => grant === permission || grant === 'compute:*' || grant === `${area}:*`);
}
