import { describe } from 'vitest';
import { defineCommandQueueConformance } from '../conformance/command-queue';
import { scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

describe.runIf(TEST_DATABASE_URL)('postgres', () => defineCommandQueueConformance(scratchPostgres));
