export { authorize, resourceNotFound } from './authorize';
export { authenticate, type CreateCredentialInput, createCredential, revokeCredential } from './credentials';
export {
  type ApiMethodDefinition,
  apiGroupName,
  defineApiGroup,
  defineApiMethod,
  isApiName,
  listApiMethods,
} from './define';
export { type ApiDispatcher, type ApiDispatchRequest, type CreateApiOptions, createApi } from './dispatcher';
export { createFetchHandler, DEFAULT_MAX_BODY_BYTES, type FetchHandlerOptions } from './fetch-handler';
export { createOpenApiDocument, inputJsonSchema, type OpenApiOptions } from './openapi';
export { grantsPermission, isApiPermission, isPermissionGrant, ROOT_TENANT_ID } from './permissions';
export { COMPUTE_NODE, COMPUTE_TENANT, resolveNodeResource, resolveTenantResource } from './resources';
export type {
  ApiCallContext,
  ApiClient,
  ApiGroup,
  ApiMethod,
  ApiPermission,
  Principal,
  ResourceRef,
} from './types';
