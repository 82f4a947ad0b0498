export type {
  Command,
  CommandKindDefinition,
  CommandPolicy,
  CommandQueue,
  CommandState,
  NewCommand,
} from './types';
