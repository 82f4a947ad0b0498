export { COMPUTE_ERROR_CODES, type ComputeErrorCode, isComputeErrorCode } from './codes';
export {
  type CheckedErrorReason,
  ComputeError,
  type ComputeErrorDetails,
  type ComputeErrorIssue,
  type ComputeErrorOptions,
  type ErrorPath,
  isComputeError,
  toComputeError,
} from './compute-error';
export { HTTP_STATUS_BY_CODE, httpStatusForCode } from './http-status';
export { ERROR_REASONS, type ErrorReason } from './reasons';
