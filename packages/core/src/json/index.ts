export { assertJson, checkJson, isJson, MAX_JSON_DEPTH } from './check-json';
export { deepFreeze } from './deep-freeze';
export { assertStorableText, findUnstorableText, storableTextProblem } from './storable-text';
export type { Json } from './types';
