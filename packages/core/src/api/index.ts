export type { ApiCallContext, ApiGroup, ApiMethod, Principal, ResourceRef } from './types';
