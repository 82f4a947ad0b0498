import { defineCommitConformance } from '../conformance/commit';
import { scratchPglite } from '../support/databases';

defineCommitConformance(scratchPglite);
