import { defineEventsConformance } from '../conformance/events';
import { scratchPglite } from '../support/databases';

defineEventsConformance(scratchPglite);
