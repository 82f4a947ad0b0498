import { describe } from 'vitest';
import { defineAgentSessionWakesConformance } from '../conformance/agent-session-wakes';
import { defineAgentSessionsConformance } from '../conformance/agent-sessions';
import { scratchPostgres, TEST_DATABASE_URL } from '../support/databases';

describe.runIf(TEST_DATABASE_URL)('postgres', () => {
  defineAgentSessionsConformance(scratchPostgres);
  defineAgentSessionWakesConformance(scratchPostgres);
});
