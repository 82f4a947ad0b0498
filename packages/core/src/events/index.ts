export { decodeEventCursor, type EventPosition, encodeEventCursor } from './cursor';
export { createEventBus, type EventBusOptions, type KernelEventBus, MAX_EVENT_NAME_LENGTH } from './event-bus';
export {
  DEFAULT_EVENTS_LIMIT,
  type EventsPage,
  MAX_EVENTS_LIMIT,
  type ReadEventsInput,
  readEvents,
} from './read-events';
export {
  DEFAULT_EVENTS_POLL_MS,
  type EventHandler,
  type EventSubscription,
  type SubscribeEventsOptions,
  subscribeEvents,
} from './subscribe';
export type { ComputeEvent, EventBus, NewEvent, StagedEvent } from './types';
