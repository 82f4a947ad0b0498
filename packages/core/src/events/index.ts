export type { ComputeEvent, EventBus, NewEvent } from './types';
