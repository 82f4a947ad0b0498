import { describe } from 'vitest';
import { defineSqlExecutorConformance } from '../conformance/sql-executor';
import { scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

// Runs whenever TEST_DATABASE_URL names a server, as it always does in CI (.ci/run sets it).
describe.runIf(TEST_DATABASE_URL)('postgres', () => defineSqlExecutorConformance(scratchPostgres));
