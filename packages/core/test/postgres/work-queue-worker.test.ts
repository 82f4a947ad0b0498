import { describe } from 'vitest';
import { defineClaimWhenDueConformance } from '../conformance/work-queue-claims';
import { defineUrgentWorkConformance } from '../conformance/work-queue-urgent';
import { defineWorkerConformance } from '../conformance/work-queue-worker';
import { scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

describe.runIf(TEST_DATABASE_URL)('postgres', () => {
  defineWorkerConformance(scratchPostgres);
  defineUrgentWorkConformance(scratchPostgres);
  defineClaimWhenDueConformance(scratchPostgres);
});
