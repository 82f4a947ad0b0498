export {
  checkProfileStep,
  checkStepId,
  MAX_PROFILE_ID_LENGTH,
  MAX_STEP_ID_LENGTH,
  PROFILE_ID_PATTERN,
  PROFILE_STEP_FIELDS,
  STEP_ID_PATTERN,
} from './check-profile-step';
export {
  checkProfile,
  defineProfile,
  IMAGE_REF_PATTERN,
  PROFILE_FIELDS,
  type ProfileErrorCode,
  ROLE_PATTERN,
  USER_DATA_KINDS,
} from './define-profile';
export { defineStep, STEP_DEFINITION_FIELDS } from './define-step';
export * from './types';
export {
  type StagedEndWrite,
  type WorkflowEnd,
  type WorkflowEndWrite,
  workflowEndWritesOf,
} from './workflow-end-write';
