export {
  MAX_COMMAND_KEY_LENGTH,
  MAX_COMMAND_REASON_LENGTH,
} from './command-input';
export {
  type CommandQueueOptions,
  createCommandQueue,
  DEFAULT_POLL_LIMIT,
  expireDueCommands,
  isCommandDue,
  MAX_POLL_LIMIT,
} from './command-queue';
export { createCommandKindRegistry, isCommandKindName } from './kind-registry';
export type { StagedCommand } from './staged-command';
export {
  assertCommandTransition,
  canTransitionCommand,
  isTerminalCommandState,
  OPEN_COMMAND_STATES,
  TERMINAL_COMMAND_STATES,
} from './state-machine';
export type {
  AgentCommandRef,
  Command,
  CommandKindDefinition,
  CommandKindEntry,
  CommandKindRegistry,
  CommandPolicy,
  CommandQueue,
  CommandState,
  CompleteCommandInput,
  KernelCommandQueue,
  NewCommand,
  PollCommandsInput,
  SettleWithReasonInput,
} from './types';
