import { defineWorkQueueConformance } from '../conformance/work-queue';
import { scratchPglite } from '../support/databases';

defineWorkQueueConformance(scratchPglite);
