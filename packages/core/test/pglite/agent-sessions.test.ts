import { defineAgentSessionsConformance } from '../conformance/agent-sessions';
import { scratchPglite } from '../support/databases';

defineAgentSessionsConformance(scratchPglite);
