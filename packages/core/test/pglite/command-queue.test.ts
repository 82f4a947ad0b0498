import { defineCommandQueueConformance } from '../conformance/command-queue';
import { defineCommandWakeConformance } from '../conformance/command-wake';
import { scratchPglite } from '../support/databases';

defineCommandQueueConformance(scratchPglite);
defineCommandWakeConformance(scratchPglite);
