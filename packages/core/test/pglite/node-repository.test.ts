import { defineNodeRepositoryConformance } from '../conformance/node-repository';
import { scratchPglite } from '../support/databases';

defineNodeRepositoryConformance(scratchPglite);
