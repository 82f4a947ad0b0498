import { defineAgentSessionWakesConformance } from '../conformance/agent-session-wakes';
import { defineAgentSessionsConformance } from '../conformance/agent-sessions';
import { scratchPglite } from '../support/databases';

defineAgentSessionsConformance(scratchPglite);
defineAgentSessionWakesConformance(scratchPglite);
