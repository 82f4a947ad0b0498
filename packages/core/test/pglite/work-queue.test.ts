import { defineWorkQueueConformance } from '../conformance/work-queue';
import { defineWorkQueueParkConformance } from '../conformance/work-queue-park';
import { defineWorkQueuePreloadConformance } from '../conformance/work-queue-preload';
import { scratchPglite } from '../support/databases';

defineWorkQueueConformance(scratchPglite);
defineWorkQueuePreloadConformance(scratchPglite);
defineWorkQueueParkConformance(scratchPglite);
