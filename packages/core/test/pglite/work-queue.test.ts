import { defineWorkQueueConformance } from '../conformance/work-queue';
import { defineWorkQueuePreloadConformance } from '../conformance/work-queue-preload';
import { scratchPglite } from '../support/databases';

defineWorkQueueConformance(scratchPglite);
defineWorkQueuePreloadConformance(scratchPglite);
