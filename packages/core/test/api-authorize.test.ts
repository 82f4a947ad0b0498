import { describe, expect, it } from 'vitest';
import { authorize, grantsPermission, isApiPermission, isPermissionGrant, type Principal } from '../src/api';
import type { ComputeError } from '../src/errors';

const node = { type: 'compute-node', tenantId: 'acme', id: 'node_1', path: ['nodeId'] } as const;

function principal(tenantId: string, permissions: string[]): Principal {
  return { credentialId: 'cred_1', tenantId, permissions };
}

function thrown(fn: () => void): ComputeError | undefined {
  try {
    fn();
  } catch (error) {
    return error as ComputeError;
  }
  return undefined;
}

describe('permission grants', () => {
  it('matches an exact grant and nothing else of the area', () => {
    expect(grantsPermission(['compute:workflows:read'], 'compute:workflows:read')).toBe(true);
    expect(grantsPermission(['compute:workflows:read'], 'compute:workflows:manage')).toBe(false);
    expect(grantsPermission(['compute:workflows:read'], 'compute:metal:read')).toBe(false);
  });

  it('lets compute:<area>:* cover every verb of that area only', () => {
    expect(grantsPermission(['compute:workflows:*'], 'compute:workflows:manage')).toBe(true);
    expect(grantsPermission(['compute:workflows:*'], 'compute:metal:manage')).toBe(false);
    expect(grantsPermission(['compute:work:*'], 'compute:workflows:read')).toBe(false);
  });

  it('lets compute:* cover every permission', () => {
    expect(grantsPermission(['compute:*'], 'compute:metal:deploy')).toBe(true);
  });

  it('never treats a wildcard as a permission a method may require', () => {
    expect(grantsPermission(['compute:*'], 'compute:workflows:*')).toBe(false);
    expect(isApiPermission('compute:workflows:*')).toBe(false);
    expect(isApiPermission('compute:Workflows:read')).toBe(false);
    expect(isApiPermission('compute:workflows')).toBe(false);
  });

  it('accepts only the documented wildcard shapes as grants', () => {
    expect(['compute:*', 'compute:workflows:*', 'compute:workflows:read'].every(isPermissionGrant)).toBe(true);
    expect(['*', 'compute:*:read', 'compute:**', 'compute:workflows:re*d'].some(isPermissionGrant)).toBe(false);
  });
});

describe('authorize', () => {
  it('allows an own resource with the permission', () => {
    expect(thrown(() => authorize(principal('acme', ['compute:workflows:read']), 'compute:workflows:read', node))).toBe(
      undefined,
    );
  });

  it('lets root act on a resource of any tenant', () => {
    expect(thrown(() => authorize(principal('root', ['compute:*']), 'compute:workflows:manage', node))).toBe(undefined);
  });

  it('still requires root to hold the permission', () => {
    const error = thrown(() => authorize(principal('root', ['compute:workflows:read']), 'compute:metal:deploy', node));
    expect(error?.code).toBe('PERMISSION_DENIED');
  });

  it('answers a resource of another tenant as NOT_FOUND, even with every permission', () => {
    const error = thrown(() => authorize(principal('globex', ['compute:*']), 'compute:workflows:read', node));
    expect(error?.toJSON()).toEqual({
      code: 'NOT_FOUND',
      message: 'compute-node not found',
      details: { path: ['nodeId'] },
    });
  });

  it('decides the tenant before the permission, so a foreign resource never reveals itself as PERMISSION_DENIED', () => {
    const error = thrown(() => authorize(principal('globex', []), 'compute:workflows:read', node));
    expect(error?.code).toBe('NOT_FOUND');
  });

  it('answers a missing permission on an own resource as PERMISSION_DENIED naming the permission', () => {
    const error = thrown(() =>
      authorize(principal('acme', ['compute:workflows:read']), 'compute:workflows:manage', node),
    );
    expect(error?.code).toBe('PERMISSION_DENIED');
    expect(error?.details).toEqual({ permission: 'compute:workflows:manage' });
  });
});
