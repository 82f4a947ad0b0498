import { describe } from 'vitest';
import { defineWorkerConformance } from '../conformance/work-queue-worker';
import { scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

describe.runIf(TEST_DATABASE_URL)('postgres', () => defineWorkerConformance(scratchPostgres));
