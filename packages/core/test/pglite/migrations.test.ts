import { defineMigrationsConformance } from '../conformance/migrations';
import { scratchPglite } from '../support/databases';

defineMigrationsConformance(scratchPglite);
