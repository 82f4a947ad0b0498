export { createEventBus, type KernelEventBus } from './event-bus';
export {
  DEFAULT_EVENTS_LIMIT,
  MAX_EVENT_TYPES,
  MAX_EVENTS_LIMIT,
  type ReadEventsInput,
  readEvents,
} from './read-events';
export { subscribeEvents } from './subscribe';
export type { ComputeEvent, EventBus, EventStaging, NewEvent } from './types';
