import { describe } from 'vitest';
import { defineCommitConformance } from '../conformance/commit';
import { scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

describe.runIf(TEST_DATABASE_URL)('postgres', () => {
  defineCommitConformance(scratchPostgres);
});
