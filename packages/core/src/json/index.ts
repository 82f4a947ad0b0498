export { assertJson, checkJson, isJson, type JsonErrorCode, type JsonIssue, MAX_JSON_DEPTH } from './check-json';
export { type DeepReadonly, deepFreeze } from './deep-freeze';
export { assertStorableText, findUnstorableText, storableTextProblem } from './storable-text';
export type { Json } from './types';
