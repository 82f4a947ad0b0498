import { defineCommandQueueConformance } from '../conformance/command-queue';
import { scratchPglite } from '../support/databases';

defineCommandQueueConformance(scratchPglite);
