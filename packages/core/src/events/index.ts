export { createEventBus, type KernelEventBus } from './event-bus';
export { type ReadEventsInput, readEvents } from './read-events';
export { subscribeEvents } from './subscribe';
export type { ComputeEvent, EventBus, EventStaging, NewEvent } from './types';
