export {
  type CommitChange,
  type CommitChangeInput,
  type CommitContext,
  type CommitRequest,
  type CommitResult,
  commit,
  type StagedWrite,
} from './commit';
