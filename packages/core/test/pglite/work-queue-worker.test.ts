import { defineWorkerConformance } from '../conformance/work-queue-worker';
import { scratchPglite } from '../support/databases';

defineWorkerConformance(scratchPglite);
