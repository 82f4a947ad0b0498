export { checkNewCommand, requireText as requireCommandText } from '../commands/command-input';
export { checkWorkRequest } from '../work/work-queue';
export {
  CONFORMANCE_COMMAND_KINDS,
  type CommandQueueHarness,
  type CommandQueueSubject,
  defineCommandQueueBehaviour,
} from './command-queue-behaviour';
export type { ConformanceAssertion, ConformanceRunner } from './runner';
export {
  defineWorkQueueBehaviour,
  type QueuedWork,
  type WorkQueueHarness,
  type WorkQueueSubject,
} from './work-queue-behaviour';
