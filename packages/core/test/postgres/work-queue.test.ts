import { describe } from 'vitest';
import { defineWorkQueueConformance } from '../conformance/work-queue';
import { defineWorkQueueParkConformance } from '../conformance/work-queue-park';
import { defineWorkQueuePreloadConformance } from '../conformance/work-queue-preload';
import { scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

describe.runIf(TEST_DATABASE_URL)('postgres', () => {
  defineWorkQueueConformance(scratchPostgres);
  defineWorkQueuePreloadConformance(scratchPostgres);
  defineWorkQueueParkConformance(scratchPostgres);
});
