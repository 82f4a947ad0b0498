import { describe } from 'vitest';
import { defineCredentialsConformance } from '../conformance/credentials';
import { scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

describe.runIf(TEST_DATABASE_URL)('postgres', () => defineCredentialsConformance(scratchPostgres));
