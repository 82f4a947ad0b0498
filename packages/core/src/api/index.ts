export { authorize, resourceNotFound } from './authorize';
export { apiCallError } from './call-error';
export { authenticate, type CreateCredentialInput, createCredential, revokeCredential } from './credentials';
export {
  type ApiCredential,
  COMPUTE_CREDENTIAL,
  type CreatedCredential,
  type CredentialsApi,
  type CredentialsPage,
  credentialsApi,
  grantCovers,
  resolveCredentialResource,
} from './credentials-api';
export { type ApiMethodDefinition, apiGroupName, defineApiGroup, defineApiMethod, listApiMethods } from './define';
export { createApi } from './dispatcher';
export {
  type DoctorApi,
  type DoctorReport,
  doctorApi,
  type ModuleFindings,
  PROVIDER_FAILED_FINDING,
  runFindings,
} from './doctor-api';
export { type ApiEvent, type ApiEventsPage, type EventsApi, eventsApi } from './events-api';
export {
  bodyTooLargeError,
  createFetchHandler,
  malformedBodyError,
  parseJsonBody,
  readJsonBody,
} from './fetch-handler';
export { createOpenApiDocument, inputJsonSchema } from './openapi';
export { grantsPermission, isApiPermission, isPermissionGrant, ROOT_TENANT_ID } from './permissions';
export { COMPUTE_NODE, COMPUTE_TENANT, resolveNodeResource, resolveTenantResource } from './resources';
export type { ApiCallContext, ApiClient, ApiGroup, ApiMethod, ApiPermission, Principal, ResourceRef } from './types';
