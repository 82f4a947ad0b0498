export { createPgliteDatabase, PGLITE_DEFAULTS, type PgliteDatabaseOptions } from './driver';
export { PgliteSession, type PgliteSessionLimits } from './session';
