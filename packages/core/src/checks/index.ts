export { assertJson, checkJson, isJson, type JsonErrorCode, type JsonIssue, MAX_JSON_DEPTH } from '../json/check-json';
export { type DeepReadonly, deepFreeze } from '../json/deep-freeze';
export { assertStorableText, findUnstorableText, storableTextProblem } from '../json/storable-text';
export { isPlainObject, type RequireTextOptions, refuseConfig, refuseInput, requireText } from './checks';
