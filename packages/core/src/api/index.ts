export { authorize, resourceNotFound } from './authorize';
export { authenticate, type CreateCredentialInput, createCredential, revokeCredential } from './credentials';
export { type ApiMethodDefinition, apiGroupName, defineApiGroup, defineApiMethod, listApiMethods } from './define';
export { createApi } from './dispatcher';
export { createFetchHandler } from './fetch-handler';
export { createOpenApiDocument, inputJsonSchema } from './openapi';
export { grantsPermission, isApiPermission, isPermissionGrant, ROOT_TENANT_ID } from './permissions';
export { COMPUTE_NODE, COMPUTE_TENANT, resolveNodeResource, resolveTenantResource } from './resources';
export type { ApiCallContext, ApiClient, ApiGroup, ApiMethod, ApiPermission, Principal, ResourceRef } from './types';
