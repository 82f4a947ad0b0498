import { describe } from 'vitest';
import { defineNodeRepositoryConformance } from '../conformance/node-repository';
import { scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

describe.runIf(TEST_DATABASE_URL)('postgres', () => defineNodeRepositoryConformance(scratchPostgres));
