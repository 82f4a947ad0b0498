import { defineSqlExecutorConformance } from '../conformance/sql-executor';
import { scratchPglite } from '../support/databases';

defineSqlExecutorConformance(scratchPglite);
