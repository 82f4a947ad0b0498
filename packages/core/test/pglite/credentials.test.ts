import { defineCredentialsConformance } from '../conformance/credentials';
import { scratchPglite } from '../support/databases';

defineCredentialsConformance(scratchPglite);
