import { defineClaimWhenDueConformance } from '../conformance/work-queue-claims';
import { defineUrgentWorkConformance } from '../conformance/work-queue-urgent';
import { defineWorkerConformance } from '../conformance/work-queue-worker';
import { scratchPglite } from '../support/databases';

defineWorkerConformance(scratchPglite);
defineUrgentWorkConformance(scratchPglite);
defineClaimWhenDueConformance(scratchPglite);
