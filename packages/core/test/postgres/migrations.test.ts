import { describe } from 'vitest';
import { defineMigrationsConformance } from '../conformance/migrations';
import { scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

describe.runIf(TEST_DATABASE_URL)('postgres', () => defineMigrationsConformance(scratchPostgres));
