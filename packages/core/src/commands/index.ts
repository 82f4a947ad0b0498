export { MAX_COMMAND_REASON_LENGTH } from './command-input';
export { createCommandQueue, DISPATCHABLE_SQL, expireDueCommands, isCommandDue, MAX_POLL_LIMIT } from './command-queue';
export { type CommandRow, commandFromJson, commandJsonSql, toCommand } from './command-rows';
export { createCommandKindRegistry, isCommandKindName } from './kind-registry';
export type { StagedCommand } from './staged-command';
export { assertCommandTransition, isTerminalCommandState, OPEN_COMMAND_STATES } from './state-machine';
export type {
  Command,
  CommandKindDefinition,
  CommandKindEntry,
  CommandKindRegistry,
  CommandPolicy,
  CommandQueue,
  CommandStaging,
  CommandState,
  KernelCommandQueue,
  NewCommand,
} from './types';
export { COMMANDS_CHANNEL } from './types';
