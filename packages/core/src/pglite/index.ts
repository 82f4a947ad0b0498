export { createPgliteDatabase, type PgliteDatabaseOptions } from './driver';
export { PgliteSession } from './session';
